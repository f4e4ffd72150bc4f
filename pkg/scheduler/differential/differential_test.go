package differential

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

const (
	// defaultScenarios run in `make test` (seeds 1..N).
	defaultScenarios = 300
	// scenariosEnv sets how many seeds to run (`make soak` runs thousands).
	scenariosEnv = "KARPFUNC_DIFF_SCENARIOS"
	// seedEnv runs one seed and prints its scenario and both plans.
	seedEnv = "KARPFUNC_DIFF_SEED"
	// maxPriceRatio bounds the median and the 90th percentile of
	// karpfunc's price over Karpenter's where both place the same pods.
	maxPriceRatio = 1.0
)

// outcome is one scenario run by both schedulers and checked.
type outcome struct {
	Karpenter, Karpfunc *plan
	KarpenterViolations []violation
	KarpfuncViolations  []violation
	// Failures are karpfunc's, each with its class.
	Failures []failure
	// Comparable: both plans valid and placing the same pods; Ratio is
	// then karpfunc's price over Karpenter's.
	Comparable bool
	Ratio      float64
}

const (
	// morePodsUnderLimits is the informational class of a workload
	// short of Karpenter's count while karpfunc places more pods in all
	// under the same NodePool limits (see run).
	morePodsUnderLimits = "info/more-pods-placed-under-nodepool-limits"
	// limitsReason is in karpfunc's reason for a pod pending because a
	// NodePool's limits leave no room.
	limitsReason = "would exceed its limits"
)

// informational classes are logged, not failures.
func informational(class string) bool {
	return strings.HasPrefix(class, "dearer/") || strings.HasPrefix(class, "info/")
}

type failure struct {
	Class  string
	Detail string
}

// classes are the distinct failure classes, sorted; a dearer plan adds
// its informational class (dearer/...) too.
func (o *outcome) classes() []string {
	var out []string
	for _, f := range o.Failures {
		if !slices.Contains(out, f.Class) {
			out = append(out, f.Class)
		}
	}
	if o.Comparable && o.Ratio > 1+1e-9 {
		out = append(out, "dearer")
	}
	sort.Strings(out)
	return out
}

func run(sc *scenario, cat *catalog.Catalog) (*outcome, error) {
	k, err := runKarpenter(sc, cat)
	if err != nil {
		return nil, err
	}
	f := runKarpfunc(sc, cat)
	o := &outcome{Karpenter: k, Karpfunc: f, KarpenterViolations: check(sc, cat, k), KarpfuncViolations: check(sc, cat, f)}
	for _, v := range o.KarpfuncViolations {
		o.Failures = append(o.Failures, failure{Class: classifyViolation(sc, f, v), Detail: v.String()})
	}
	if len(o.KarpenterViolations) > 0 {
		return o, nil // Karpenter is wrong here: nothing of karpfunc's is measured against it
	}
	// Replicas of one workload are interchangeable: karpfunc fails when it
	// places fewer of a workload's pods than Karpenter does.
	//
	// Pods of different workloads compete for capacity a NodePool's limits
	// hold back: when karpfunc places more pods in all, and every pod of
	// the workload it leaves pending is pending for those limits, the pods
	// Karpenter placed do not fit karpfunc's capacity because more pods
	// use it. That is logged (informational), not held against karpfunc;
	// with as many pods or fewer it is a failure.
	kPlaced, fPlaced := byWorkload(sc, k.Placed()), byWorkload(sc, f.Placed())
	morePods := len(f.Placed()) > len(k.Placed())
	for _, app := range sortedMapKeys(kPlaced) {
		if fPlaced[app] >= kPlaced[app] {
			continue
		}
		var pending []string
		allForLimits := true
		for _, pod := range sc.Pods {
			if reason, ok := f.Pending[pod.Name]; ok && pod.Labels["app"] == app {
				pending = append(pending, fmt.Sprintf("%s (%s)", pod.Name, oneLine(reason, 200)))
				allForLimits = allForLimits && strings.Contains(reason, limitsReason)
			}
		}
		class := classifyPending(sc, app)
		if morePods && allForLimits {
			class = morePodsUnderLimits
		}
		o.Failures = append(o.Failures, failure{Class: class, Detail: fmt.Sprintf("workload %s: Karpenter places %d pods validly, karpfunc %d (of %d pods in all, Karpenter %d); pending in karpfunc's plan: %s",
			app, kPlaced[app], fPlaced[app], len(f.Placed()), len(k.Placed()), strings.Join(pending, "; "))})
	}
	if len(o.KarpfuncViolations) == 0 && slices.Equal(k.Placed(), f.Placed()) {
		o.Comparable = true
		switch kp, fp := k.Price(), f.Price(); {
		case kp == 0 && fp == 0:
			o.Ratio = 1
		case kp == 0:
			o.Ratio = math.Inf(1)
		default:
			o.Ratio = fp / kp
		}
	}
	return o, nil
}

// classifyViolation names the defect class a rule karpfunc breaks
// belongs to, by the scenario's features.
func classifyViolation(sc *scenario, f *plan, v violation) string {
	switch v.Rule {
	case "resources":
		for _, nn := range f.New {
			if nn.Name == v.Node && len(sc.DaemonSets) > 0 && hasEffect(sc.poolByName(nn.Pool), corev1.TaintEffectPreferNoSchedule) {
				return "resources/daemonset-on-prefer-no-schedule-pool"
			}
		}
	case "spread":
		pod := podByName(sc, v.Pod)
		switch {
		case pod == nil:
		case hasPreferredNodeAffinity(pod):
			return "spread/preference-narrows-domains"
		case countsExcludedPods(sc, pod):
			return "spread/counts-pods-on-nodes-its-affinity-excludes"
		}
	case "node-affinity":
		if pod := podByName(sc, v.Pod); pod != nil && usesUndefinedLabel(pod) {
			return "node-affinity/label-the-nodepool-does-not-define"
		}
	}
	return v.Rule + "/other"
}

// byWorkload counts placed pods per workload (label app).
func byWorkload(sc *scenario, placed []string) map[string]int {
	out := map[string]int{}
	for _, name := range placed {
		if pod := podByName(sc, name); pod != nil {
			out[pod.Labels["app"]]++
		}
	}
	return out
}

// classifyPending names why a workload's pods Karpenter places may be
// left pending, by the workload's constraints and the NodePools.
func classifyPending(sc *scenario, app string) string {
	var pod *corev1.Pod
	for _, p := range sc.Pods {
		if p.Labels["app"] == app {
			pod = p
			break
		}
	}
	switch {
	case pod == nil:
		return "pending/other"
	case pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAffinity != nil:
		return "pending/pod-affinity"
	case usesUndefinedLabel(pod):
		return "pending/label-the-nodepool-does-not-define"
	case slices.ContainsFunc(sc.NodePools, func(np *karpv1.NodePool) bool { return len(np.Spec.Limits) > 0 }):
		return "pending/nodepool-limits"
	}
	return "pending/other"
}

// dearerCause finds what makes karpfunc's plan dearer by counterfactual:
// the same scenario with NodePool weights made distinct in Karpenter's
// order (weight, then name descending), then without DaemonSets; the
// first change after which karpfunc is no dearer names the class.
func dearerCause(sc *scenario, cat *catalog.Catalog) string {
	if equalWeights(sc) {
		if o, err := run(distinctWeights(sc), cat); err == nil && o.Comparable && o.Ratio <= 1+1e-9 {
			return "dearer/equal-weight-nodepools"
		}
	}
	if len(sc.DaemonSets) > 0 {
		c := sc.deepCopy()
		c.DaemonSets = nil
		c.Bound = slices.DeleteFunc(c.Bound, func(p *corev1.Pod) bool { return len(p.OwnerReferences) > 0 })
		if o, err := run(c, cat); err == nil && o.Comparable && o.Ratio <= 1+1e-9 {
			return "dearer/daemonset-overhead"
		}
	}
	o, err := run(sc, cat)
	if err != nil || !o.Comparable {
		return "dearer/other"
	}
	if choices(o.Karpenter) != choices(o.Karpfunc) {
		return "dearer/nodepool-or-capacity-type-choice"
	}
	return "dearer/packing"
}

// choices are the NodePools and capacity types a plan's new nodes use.
func choices(p *plan) string {
	seen := map[string]bool{}
	for _, n := range p.New {
		seen[n.Pool+"/"+n.CapacityType] = true
	}
	return strings.Join(sortedMapKeys(seen), ",")
}

func weightOf(np *karpv1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func equalWeights(sc *scenario) bool {
	seen := map[int32]bool{}
	for _, np := range sc.NodePools {
		if seen[weightOf(np)] {
			return true
		}
		seen[weightOf(np)] = true
	}
	return false
}

// distinctWeights gives the NodePools weights 1..n in the order Karpenter
// tries them (utils/nodepool.OrderByWeight: weight, then name descending).
func distinctWeights(sc *scenario) *scenario {
	c := sc.deepCopy()
	order := slices.Clone(c.NodePools)
	slices.SortFunc(order, func(a, b *karpv1.NodePool) int {
		if wa, wb := weightOf(a), weightOf(b); wa != wb {
			return int(wa) - int(wb)
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i, np := range order {
		np.Spec.Weight = new(int32(i + 1))
	}
	return c
}

func hasEffect(np *karpv1.NodePool, effect corev1.TaintEffect) bool {
	if np == nil {
		return false
	}
	return slices.ContainsFunc(np.Spec.Template.Spec.Taints, func(t corev1.Taint) bool { return t.Effect == effect })
}

// countsExcludedPods: an existing node the pod's required affinity
// excludes holds pods its spread constraint selects (nodeAffinityPolicy
// Honor leaves them out of the count).
func countsExcludedPods(sc *scenario, pod *corev1.Pod) bool {
	for _, n := range sc.Nodes {
		if matchesNode(&pod.Spec, n.Labels) {
			continue
		}
		for _, q := range sc.Bound {
			for _, c := range pod.Spec.TopologySpreadConstraints {
				if q.Spec.NodeName == n.Name && selects(c.LabelSelector, q) {
					return true
				}
			}
		}
	}
	return false
}

func hasPreferredNodeAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0
}

// usesUndefinedLabel: the pod's required terms or preferences name a
// custom label (not well known).
func usesUndefinedLabel(pod *corev1.Pod) bool {
	for k := range pod.Spec.NodeSelector {
		if isCustom(k) {
			return true
		}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			for _, t := range r.NodeSelectorTerms {
				for _, e := range t.MatchExpressions {
					if isCustom(e.Key) {
						return true
					}
				}
			}
		}
		for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			for _, e := range p.Preference.MatchExpressions {
				if isCustom(e.Key) {
					return true
				}
			}
		}
	}
	return false
}

func podByName(sc *scenario, name string) *corev1.Pod {
	for _, p := range sc.Pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func scenarioCount(t *testing.T) int {
	v := os.Getenv(scenariosEnv)
	if v == "" {
		return defaultScenarios
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number of scenarios", scenariosEnv, v)
	}
	return n
}

// TestDifferential runs seeds 1..N through both schedulers and fails on
// every class of karpfunc failure, printing one minimal example of each
// (the scenario shrunk while the class persists), and when karpfunc's
// median or 90th-percentile price ratio exceeds maxPriceRatio.
func TestDifferential(t *testing.T) {
	cat := testCatalog(t)
	if v := os.Getenv(seedEnv); v != "" {
		seed, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a seed number", seedEnv, v)
		}
		sc := generate(seed, cat)
		o, err := run(sc, cat)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s\n%s\n%s", render(sc), o.Karpenter, o.Karpfunc)
		for _, v := range o.KarpenterViolations {
			t.Logf("Karpenter breaks %s", v)
		}
		for _, f := range o.Failures {
			if informational(f.Class) {
				t.Logf("informational: %s: %s", f.Class, f.Detail)
				continue
			}
			t.Errorf("%s: %s", f.Class, f.Detail)
		}
		t.Logf("comparable %v ratio %.3f", o.Comparable, o.Ratio)
		return
	}
	n := scenarioCount(t)
	type example struct {
		seed int64
		sc   *scenario
	}
	counts := map[string]int{}
	first := map[string]example{}
	seedsOf := map[string][]int64{} // every seed of each failure class, to rerun one by one
	karpenterWrong := map[string]int{}
	karpenterWrongFirst := map[string]int64{}
	var ratios []float64
	type dear struct {
		seed  int64
		ratio float64
	}
	var worst []dear
	for seed := int64(1); seed <= int64(n); seed++ {
		sc := generate(seed, cat)
		o, err := run(sc, cat)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, render(sc))
		}
		for _, v := range o.KarpenterViolations {
			key := v.Rule
			if karpenterWrong[key] == 0 {
				karpenterWrongFirst[key] = seed
			}
			karpenterWrong[key]++
		}
		for _, class := range o.classes() {
			if class == "dearer" {
				class = dearerCause(sc, cat)
			}
			if counts[class] == 0 {
				first[class] = example{seed, sc}
			}
			counts[class]++
			if !informational(class) {
				seedsOf[class] = append(seedsOf[class], seed)
			}
		}
		if o.Comparable {
			ratios = append(ratios, o.Ratio)
			if o.Ratio > 1+1e-9 {
				worst = append(worst, dear{seed, o.Ratio})
			}
		}
	}
	sort.Float64s(ratios)
	median, p90 := quantile(ratios, 0.5), quantile(ratios, 0.9)
	sort.Slice(worst, func(i, j int) bool { return worst[i].ratio > worst[j].ratio })
	var summary strings.Builder
	fmt.Fprintf(&summary, "scenarios %d (seeds 1..%d); both valid with the same pods placed: %d; price ratio karpfunc/Karpenter median %.3f, p90 %.3f, dearer in %d\n",
		n, n, len(ratios), median, p90, len(worst))
	for i, d := range worst {
		if i == 5 {
			break
		}
		fmt.Fprintf(&summary, "  dearer: seed %d ratio %.3f\n", d.seed, d.ratio)
	}
	for _, rule := range sortedMapKeys(karpenterWrong) {
		fmt.Fprintf(&summary, "Karpenter breaks %s in %d violations (first seed %d); those scenarios are not held against karpfunc\n", rule, karpenterWrong[rule], karpenterWrongFirst[rule])
	}
	for _, class := range sortedMapKeys(counts) {
		fmt.Fprintf(&summary, "class %s: %d scenarios (first seed %d)\n", class, counts[class], first[class].seed)
		if seeds := seedsOf[class]; len(seeds) > 0 {
			fmt.Fprintf(&summary, "  seeds: %v\n", seeds)
		}
	}
	t.Log(summary.String())
	for _, rule := range sortedMapKeys(karpenterWrong) {
		small := shrinkWhile(generate(karpenterWrongFirst[rule], cat), func(c *scenario) bool { return karpenterBreaks(c, cat, rule) })
		o, _ := run(small, cat)
		note := ""
		if !slices.ContainsFunc(o.KarpenterViolations, func(v violation) bool { return v.Rule == rule }) {
			note = "not reproduced on this run: Karpenter's choices vary between runs (its scheduler iterates maps); "
		}
		t.Logf("Karpenter breaks %s; %sminimal example (from seed %d), not held against karpfunc:\n%s\n%s%s%s", rule, note, karpenterWrongFirst[rule], render(small), o.Karpenter, o.Karpfunc, describe(o, ""))
	}
	for _, class := range sortedMapKeys(counts) {
		ex := first[class]
		small := shrink(ex.sc, cat, class)
		o, _ := run(small, cat)
		note := ""
		if !slices.ContainsFunc(o.Failures, func(f failure) bool { return f.Class == class }) && !informational(class) {
			note = " (not reproduced on this run: Karpenter's choices vary between runs)"
		}
		msg := fmt.Sprintf("%s in %d of %d scenarios; minimal example (from seed %d)%s:\n%s\n%s%s%s", class, counts[class], n, ex.seed, note, render(small), o.Karpenter, o.Karpfunc, describe(o, class))
		if informational(class) {
			t.Log("informational: " + msg)
			continue
		}
		t.Error(msg)
	}
	if median > maxPriceRatio || p90 > maxPriceRatio {
		t.Errorf("karpfunc is dearer than Karpenter where both place the same pods: median ratio %.3f, p90 %.3f (each must be <= %.2f)", median, p90, maxPriceRatio)
	}
}

// describe lists what the example shows for its class.
func describe(o *outcome, class string) string {
	var b strings.Builder
	for _, f := range o.Failures {
		if f.Class == class {
			fmt.Fprintf(&b, "karpfunc: %s\n", f.Detail)
		}
	}
	for _, v := range o.KarpenterViolations {
		fmt.Fprintf(&b, "Karpenter breaks %s\n", v)
	}
	if o.Comparable {
		fmt.Fprintf(&b, "price ratio karpfunc/Karpenter %.3f\n", o.Ratio)
	}
	return b.String()
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func sortedMapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hasClass reports whether the scenario still shows class.
func hasClass(sc *scenario, cat *catalog.Catalog, class string) bool {
	o, err := run(sc, cat)
	if err != nil {
		return false
	}
	for _, c := range o.classes() {
		if c == class || (c == "dearer" && class == dearerCause(sc, cat)) {
			return true
		}
	}
	return false
}

// karpenterBreaks reports whether Karpenter's plan breaks rule.
func karpenterBreaks(sc *scenario, cat *catalog.Catalog, rule string) bool {
	o, err := run(sc, cat)
	return err == nil && slices.ContainsFunc(o.KarpenterViolations, func(v violation) bool { return v.Rule == rule })
}

// shrink removes pods, nodes, DaemonSets and NodePools one at a time
// while the scenario still shows class, until nothing more can go.
func shrink(sc *scenario, cat *catalog.Catalog, class string) *scenario {
	return shrinkWhile(sc, func(c *scenario) bool { return hasClass(c, cat, class) })
}

func shrinkWhile(sc *scenario, holds func(*scenario) bool) *scenario {
	cur := sc.deepCopy()
	for changed := true; changed; {
		changed = false
		for _, cand := range smaller(cur) {
			if holds(cand) {
				cur, changed = cand, true
				break
			}
		}
	}
	return cur
}

// smaller lists the scenarios with one element fewer.
func smaller(sc *scenario) []*scenario {
	var out []*scenario
	for i := range sc.Pods {
		c := sc.deepCopy()
		c.Pods = slices.Delete(c.Pods, i, i+1)
		if len(c.Pods) > 0 {
			out = append(out, c)
		}
	}
	for i := range sc.Bound {
		c := sc.deepCopy()
		c.Bound = slices.Delete(c.Bound, i, i+1)
		out = append(out, c)
	}
	for i, n := range sc.Nodes {
		c := sc.deepCopy()
		c.Nodes = slices.Delete(c.Nodes, i, i+1)
		c.NodeClaims = slices.DeleteFunc(c.NodeClaims, func(nc *karpv1.NodeClaim) bool { return nc.Name == n.Name })
		c.Bound = slices.DeleteFunc(c.Bound, func(p *corev1.Pod) bool { return p.Spec.NodeName == n.Name })
		out = append(out, c)
	}
	for i, ds := range sc.DaemonSets {
		c := sc.deepCopy()
		c.DaemonSets = slices.Delete(c.DaemonSets, i, i+1)
		c.Bound = slices.DeleteFunc(c.Bound, func(p *corev1.Pod) bool {
			return len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Name == ds.Name
		})
		out = append(out, c)
	}
	for i, np := range sc.NodePools {
		if len(sc.NodePools) == 1 || slices.ContainsFunc(sc.Nodes, func(n *corev1.Node) bool { return n.Labels[karpv1.NodePoolLabelKey] == np.Name }) {
			continue
		}
		c := sc.deepCopy()
		c.NodePools = slices.Delete(c.NodePools, i, i+1)
		out = append(out, c)
	}
	return out
}
