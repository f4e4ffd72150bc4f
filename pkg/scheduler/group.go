package scheduler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// group is a set of pending pods the scheduler cannot tell apart: same
// namespace, labels, requests and scheduling constraints. Everything that
// depends only on those is computed once per group.
type group struct {
	id     int
	pod    *corev1.Pod // the first; stands for all
	ns     string
	labels labels.Set
	req    resVec
	ports  []hostPort
	// volumeReqs come from the pods' PVCs; volumeErr is set when a PVC
	// cannot be resolved.
	volumeReqs scheduling.Requirements
	volumeErr  string
	// matched are the counters whose selector matches the group's pods;
	// owned the anti-affinity owner counters of its required terms;
	// blockers the owner counters whose selector matches it.
	matched, owned, blockers []*counter
	variants                 []*variant
	// nodeFilter: which existing nodes spread constraints with
	// nodeAffinityPolicy Honor count (nodeSelector plus one required
	// term); computed on first use.
	nodeFilter []scheduling.Requirements
	// nodeFilterKeys are nodeFilter's requirements keys (for the pool
	// variants of each).
	nodeFilterKeys []string
	done           bool // no more relaxations
	// apart: the pod carries apartOnHostname's term (its last preferred
	// anti-affinity term), relaxed after every preference of its own.
	apart bool
	// pending counts the group's pods not placed yet.
	pending int
}

// relaxation says how many soft constraints are dropped, in Karpenter's
// order: required node affinity terms (OR) tried one by one, then
// preferred pod affinity, preferred pod anti-affinity, preferred node
// affinity (heaviest first), ScheduleAnyway spread, and last a toleration
// of PreferNoSchedule taints.
type relaxation struct {
	term, podAffinity, podAntiAffinity, nodePreference, scheduleAnyway int
	tolerateSoft                                                       bool
}

// variant is a group at one relaxation level.
type variant struct {
	g     *group
	relax relaxation
	reqs  scheduling.Requirements
	// mustExist are keys reqs admit a missing label for but the pods need
	// present (see labelPresence); reqsKey includes them.
	mustExist   []string
	reqsKey     string
	tolerations []corev1.Toleration
	constraints []*constraint
	// per pool: variant and whether the pool's taints are tolerated.
	pools     []*poolVariant
	tolerates []int8 // 0 unknown, 1 yes, -1 no
	err       string
}

type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

func (a hostPort) conflicts(b hostPort) bool {
	return a.port == b.port && a.protocol == b.protocol && (a.ip == b.ip || a.ip == "" || b.ip == "" || a.ip == "0.0.0.0" || b.ip == "0.0.0.0")
}

func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container) {
		for _, container := range cs {
			for _, port := range container.Ports {
				if port.HostPort > 0 {
					proto := port.Protocol
					if proto == "" {
						proto = corev1.ProtocolTCP
					}
					out = append(out, hostPort{protocol: proto, ip: port.HostIP, port: port.HostPort})
				}
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

// isNil: part is a nil pointer or slice, which json.Marshal writes as null.
func isNil(part any) bool {
	switch p := part.(type) {
	case *corev1.Affinity:
		return p == nil
	case []corev1.Toleration:
		return p == nil
	case []corev1.TopologySpreadConstraint:
		return p == nil
	}
	return false
}

// groupKey is the identity of a pod for scheduling: everything the solver
// reads from a pending pod.
func groupKey(pod *corev1.Pod, req resVec) string {
	var builder strings.Builder
	builder.WriteString(pod.Namespace)
	builder.WriteByte('|')
	keys := make([]string, 0, len(pod.Labels))
	for key := range pod.Labels {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		builder.WriteString(key)
		builder.WriteByte('=')
		builder.WriteString(pod.Labels[key])
		builder.WriteByte(',')
	}
	builder.WriteByte('|')
	for _, value := range req {
		builder.WriteString(strconv.FormatInt(value, 36))
		builder.WriteByte(',')
	}
	builder.WriteByte('|')
	if len(pod.Spec.NodeSelector) > 0 {
		fmt.Fprint(&builder, pod.Spec.NodeSelector)
	}
	spec := pod.Spec
	for _, part := range []any{spec.Affinity, spec.Tolerations, spec.TopologySpreadConstraints} {
		builder.WriteByte('|')
		if isNil(part) {
			continue // what json.Marshal writes as null, without marshalling
		}
		if raw, err := json.Marshal(part); err == nil && string(raw) != "null" {
			builder.Write(raw)
		}
	}
	builder.WriteByte('|')
	for _, port := range podHostPorts(pod) {
		fmt.Fprintf(&builder, "%s/%s:%d,", port.protocol, port.ip, port.port)
	}
	builder.WriteByte('|')
	for _, volume := range spec.Volumes {
		if volume.PersistentVolumeClaim != nil {
			builder.WriteString(volume.PersistentVolumeClaim.ClaimName)
			builder.WriteByte(',')
		} else if volume.Ephemeral != nil {
			builder.WriteString("~" + pod.Name + "-" + volume.Name) // a per-pod PVC
			builder.WriteByte(',')
		}
	}
	return builder.String()
}

func preferredNodeTerms(pod *corev1.Pod) []corev1.PreferredSchedulingTerm {
	affinity := pod.Spec.Affinity
	if affinity == nil || affinity.NodeAffinity == nil {
		return nil
	}
	terms := slices.Clone(affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	slices.SortStableFunc(terms, func(x, y corev1.PreferredSchedulingTerm) int { return -cmp.Compare(x.Weight, y.Weight) })
	return terms
}

func preferredPodTerms(terms []corev1.WeightedPodAffinityTerm) []corev1.PodAffinityTerm {
	sorted := slices.Clone(terms)
	slices.SortStableFunc(sorted, func(x, y corev1.WeightedPodAffinityTerm) int { return -cmp.Compare(x.Weight, y.Weight) })
	out := make([]corev1.PodAffinityTerm, len(sorted))
	for i, weighted := range sorted {
		out[i] = weighted.PodAffinityTerm
	}
	return out
}

func podAffinity(pod *corev1.Pod) (required []corev1.PodAffinityTerm, preferred []corev1.PodAffinityTerm) {
	if affinity := pod.Spec.Affinity; affinity != nil && affinity.PodAffinity != nil {
		return affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, preferredPodTerms(affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return nil, nil
}

func podAntiAffinity(pod *corev1.Pod) (required []corev1.PodAffinityTerm, preferred []corev1.PodAffinityTerm) {
	if affinity := pod.Spec.Affinity; affinity != nil && affinity.PodAntiAffinity != nil {
		return affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, preferredPodTerms(affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return nil, nil
}

func requiredNodeTermCount(pod *corev1.Pod) int {
	if affinity := pod.Spec.Affinity; affinity != nil && affinity.NodeAffinity != nil && affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return len(affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	return 0
}

func scheduleAnyway(pod *corev1.Pod) int {
	count := 0
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			count++
		}
	}
	return count
}

// next is the relaxation after r, or false when nothing is left to relax.
func (s *solver) next(g *group, r relaxation) (relaxation, bool) {
	pod := g.pod
	_, prefAffinity := podAffinity(pod)
	_, prefAnti := podAntiAffinity(pod)
	hint := 0
	if g.apart {
		hint = 1
	}
	switch {
	case r.term < requiredNodeTermCount(pod)-1:
		r.term++
	case r.podAffinity < len(prefAffinity):
		r.podAffinity++
	case r.podAntiAffinity < len(prefAnti)-hint:
		r.podAntiAffinity++
	case r.nodePreference < len(preferredNodeTerms(pod)):
		r.nodePreference++
	case r.scheduleAnyway < scheduleAnyway(pod):
		r.scheduleAnyway++
	case s.preferNoSchedule && !r.tolerateSoft:
		r.tolerateSoft = true
	case r.podAntiAffinity < len(prefAnti):
		// apartOnHostname's term, last: a target that must tolerate a
		// PreferNoSchedule taint to be placed at all still takes a node
		// of its own there while it can.
		r.podAntiAffinity++
	default:
		return r, false
	}
	return r, true
}

// variantAt returns the group's variant at relaxation level i, or nil when
// there are not that many levels.
func (s *solver) variantAt(g *group, i int) *variant {
	for len(g.variants) <= i {
		if g.done {
			return nil
		}
		var relax relaxation
		if count := len(g.variants); count > 0 {
			var ok bool
			if relax, ok = s.next(g, g.variants[count-1].relax); !ok {
				g.done = true
				return nil
			}
		}
		g.variants = append(g.variants, s.newVariant(g, relax))
	}
	return g.variants[i]
}

func (s *solver) newVariant(g *group, r relaxation) *variant {
	pod := g.pod
	built := &variant{g: g, relax: r, pools: make([]*poolVariant, len(s.pools)), tolerates: make([]int8, len(s.pools))}
	built.reqs = variantRequirements(g, r)
	var conflict string
	built.mustExist, conflict = labelPresence(g, r, built.reqs)
	built.reqsKey = requirementsKey(built.reqs) + presenceKey(built.mustExist)
	if conflict != "" {
		built.err = conflict
	}
	built.tolerations = pod.Spec.Tolerations
	if r.tolerateSoft {
		built.tolerations = append(slices.Clone(built.tolerations), corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})
	}

	s.addSpreadConstraints(built)
	reqAff, prefAff := podAffinity(pod)
	reqAnti, prefAnti := podAntiAffinity(pod)
	s.addTermConstraints(built, affinity, reqAff, "required pod affinity")
	s.addTermConstraints(built, affinity, prefAff[min(r.podAffinity, len(prefAff)):], "preferred pod affinity")
	s.addTermConstraints(built, antiAffinity, reqAnti, "required pod anti-affinity")
	s.addTermConstraints(built, antiAffinity, prefAnti[min(r.podAntiAffinity, len(prefAnti)):], "preferred pod anti-affinity")
	for _, counter := range g.blockers {
		built.constraints = append(built.constraints, &constraint{kind: blocked, c: counter,
			desc: fmt.Sprintf("the required pod anti-affinity of pods already placed (on %s, against pods matching %q)", counter.key, counter.selector.String())})
	}
	return built
}

// variantRequirements is what the group's pods require of a node under
// relaxation r: the nodeSelector, the required node affinity term r is
// at, the heaviest preferred term not yet relaxed, and the volumes'
// requirements.
func variantRequirements(g *group, r relaxation) scheduling.Requirements {
	pod := g.pod
	reqs := scheduling.NewLabelRequirements(pod.Spec.NodeSelector)
	if affinity := pod.Spec.Affinity; affinity != nil && affinity.NodeAffinity != nil && affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if terms := affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; r.term < len(terms) {
			reqs.Add(scheduling.NewNodeSelectorRequirements(terms[r.term].MatchExpressions...).Values()...)
		}
	}
	// Like Karpenter, the heaviest remaining preferred term is required
	// until relaxed.
	if prefs := preferredNodeTerms(pod); r.nodePreference < len(prefs) {
		reqs.Add(scheduling.NewNodeSelectorRequirements(prefs[r.nodePreference].Preference.MatchExpressions...).Values()...)
	}
	if g.volumeReqs != nil {
		reqs.Add(g.volumeReqs.Values()...)
	}
	return reqs
}

// addSpreadConstraints adds the pod's topology spread constraints, less
// the first ScheduleAnyway ones the variant's relaxation dropped.
func (s *solver) addSpreadConstraints(v *variant) {
	group := v.g
	anyway := 0
	for _, tsc := range group.pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			anyway++
			if anyway <= v.relax.scheduleAnyway {
				continue
			}
		}
		counter, err := s.counters.spreadCounter(group.pod, group.ns, tsc)
		if err != nil {
			v.err = fmt.Sprintf("invalid topologySpreadConstraints labelSelector: %v", err)
			continue
		}
		v.constraints = append(v.constraints, spreadConstraint(group, tsc, counter))
	}
}

// matchLabelValues is the pod's value of each of keys it has (nil when
// none), added to a spread constraint's selector.
func matchLabelValues(pod *corev1.Pod, keys []string) map[string]string {
	var extra map[string]string
	for _, key := range keys {
		if val, ok := pod.Labels[key]; ok {
			if extra == nil {
				extra = map[string]string{}
			}
			extra[key] = val
		}
	}
	return extra
}

// spreadConstraint is the rule a topology spread constraint counted by c
// puts on g's pods.
func spreadConstraint(g *group, tsc corev1.TopologySpreadConstraint, c *counter) *constraint {
	// Defaults as in Kubernetes and Karpenter: taints Ignore, affinity Honor.
	rule := &constraint{kind: spread, c: c, maxSkew: max(tsc.MaxSkew, 1),
		honorTaints:    tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
		ignoreAffinity: tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore}
	if tsc.MinDomains != nil {
		rule.minDomains = *tsc.MinDomains
	}
	if c.matches(g.ns, g.labels) {
		rule.self = 1
	}
	rule.desc = fmt.Sprintf("topology spread on %s (maxSkew %d) over %s", tsc.TopologyKey, rule.maxSkew, c.selector.String())
	return rule
}

// addTermConstraints adds a rule of the given kind for each pod
// (anti-)affinity term; what names the terms in messages.
func (s *solver) addTermConstraints(v *variant, kind constraintKind, terms []corev1.PodAffinityTerm, what string) {
	group := v.g
	for _, term := range terms {
		counter, err := s.counters.forTerm(term, group.ns, false)
		if err != nil {
			v.err = fmt.Sprintf("invalid %s labelSelector: %v", what, err)
			continue
		}
		rule := &constraint{kind: kind, c: counter, desc: fmt.Sprintf("%s on %s to pods matching %q", what, term.TopologyKey, counter.selector.String())}
		if counter.matches(group.ns, group.labels) {
			rule.self = 1
		}
		v.constraints = append(v.constraints, rule)
	}
}

func requirementsKey(r scheduling.Requirements) string {
	keys := r.Keys().UnsortedList()
	slices.Sort(keys)
	var builder strings.Builder
	for _, key := range keys {
		builder.WriteString(r.Get(key).String())
		builder.WriteByte(';')
	}
	return builder.String()
}

// poolVariant is the variant's view of pool i.
func (s *solver) variantPool(v *variant, i int) *poolVariant {
	if vp := v.pools[i]; vp != nil {
		return vp
	}
	vp := s.poolVariantFor(s.pools[i], v.reqs, v.reqsKey, v.mustExist)
	v.pools[i] = vp
	return vp
}

func (v *variant) toleratesPool(pl *pool, i int) bool {
	if v.tolerates[i] == 0 {
		v.tolerates[i] = -1
		if pl.taints.Tolerates(v.tolerations) == nil {
			v.tolerates[i] = 1
		}
	}
	return v.tolerates[i] == 1
}

// selfAffine reports whether a required pod affinity term of g's pods
// selects g's own pods: in their namespace (no namespaces and no
// namespaceSelector, a namespaceSelector {}, or their namespace listed)
// and by a labelSelector their labels match. A term with a namespace
// label selector is not looked into.
func (g *group) selfAffine() bool {
	required, _ := podAffinity(g.pod)
	for _, term := range required {
		inNamespace := false
		switch {
		case term.NamespaceSelector != nil:
			inNamespace = len(term.NamespaceSelector.MatchLabels) == 0 && len(term.NamespaceSelector.MatchExpressions) == 0
		case len(term.Namespaces) > 0:
			inNamespace = slices.Contains(term.Namespaces, g.ns)
		default:
			inNamespace = true
		}
		if !inNamespace || term.LabelSelector == nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err == nil && sel.Matches(g.labels) {
			return true
		}
	}
	return false
}

// spreadTargets steer, in a second solve, the pods that the required pod
// affinity of pods a first solve left pending selects: apart holds the
// label selectors, by namespace, of such terms on kubernetes.io/hostname;
// zones the terms on topology.kubernetes.io/zone of pods that must run in
// some zones only (see zoneAffinityTarget). nil steers no pod.
type spreadTargets = *targetHints

type targetHints struct {
	apart map[string][]labels.Selector
	zones []zoneTarget
}

// zoneTarget: pods in ns that sel selects are the targets of required pod
// affinity on the zone of pods that can run only in zones.
type zoneTarget struct {
	ns    string
	sel   labels.Selector
	zones []string
}

// hostAffinityTargets collects the spreadTargets of the unschedulable
// pods: their required pod affinity terms on kubernetes.io/hostname (for
// apart) or on topology.kubernetes.io/zone (for zones) that name no
// namespace (so select in the pod's own) and do not select the pod itself
// (replicas affine to each other need one domain, not several). nil when
// there are none.
func hostAffinityTargets(unschedulable []Unschedulable) spreadTargets {
	var targets *targetHints
	for _, u := range unschedulable {
		required, _ := podAffinity(u.Pod)
		for _, term := range required {
			if (term.TopologyKey != corev1.LabelHostname && term.TopologyKey != corev1.LabelTopologyZone) ||
				term.LabelSelector == nil || len(term.Namespaces) > 0 || term.NamespaceSelector != nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			if err != nil || sel.Empty() || sel.Matches(labels.Set(u.Pod.Labels)) {
				continue
			}
			var zones []string
			if term.TopologyKey == corev1.LabelTopologyZone {
				if zones = requiredZones(u.Pod); len(zones) == 0 {
					continue
				}
			}
			if targets == nil {
				targets = &targetHints{apart: map[string][]labels.Selector{}}
			}
			if zones != nil {
				targets.zones = append(targets.zones, zoneTarget{ns: u.Pod.Namespace, sel: sel, zones: zones})
			} else {
				targets.apart[u.Pod.Namespace] = append(targets.apart[u.Pod.Namespace], sel)
			}
		}
	}
	return targets
}

// requiredZones are the zones pod's nodeSelector and required node
// affinity allow, when every required term limits the zone to listed
// values; nil otherwise.
func requiredZones(pod *corev1.Pod) []string {
	var zones []string
	for _, term := range requiredTerms(pod) {
		if !term.Has(corev1.LabelTopologyZone) {
			return nil
		}
		r := term.Get(corev1.LabelTopologyZone)
		if r.Operator() != corev1.NodeSelectorOpIn {
			return nil
		}
		zones = append(zones, r.Values()...)
	}
	slices.Sort(zones)
	return slices.Compact(zones)
}

// selects reports whether pod is a target for apart (false on nil).
func (t *targetHints) selects(pod *corev1.Pod) bool {
	if t == nil {
		return false
	}
	for _, sel := range t.apart[pod.Namespace] {
		if sel.Matches(labels.Set(pod.Labels)) {
			return true
		}
	}
	return false
}

// zonesFor are the zones the first zone target that selects pod names (nil
// on nil or when none selects it).
func (t *targetHints) zonesFor(pod *corev1.Pod) []string {
	if t == nil {
		return nil
	}
	for _, z := range t.zones {
		if z.ns == pod.Namespace && z.sel.Matches(labels.Set(pod.Labels)) {
			return z.zones
		}
	}
	return nil
}

// inZones is pod with one more preferred node affinity term, of the
// lowest weight, for zones: a target placed from it goes, while it can,
// to a zone where the pods with required pod affinity to it on the zone
// can run, and relaxes the term, as any preference, when it cannot. The
// copy stands for the group only; plans list the pods as given.
func inZones(pod *corev1.Pod, zones []string) *corev1.Pod {
	hinted := *pod
	hinted.Spec = *pod.Spec.DeepCopy()
	if hinted.Spec.Affinity == nil {
		hinted.Spec.Affinity = &corev1.Affinity{}
	}
	if hinted.Spec.Affinity.NodeAffinity == nil {
		hinted.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := hinted.Spec.Affinity.NodeAffinity
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{
		Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}}}})
	return &hinted
}

// apartOnHostname is pod with one more preferred pod anti-affinity term,
// of the lowest weight, against pods with its labels on
// kubernetes.io/hostname: a group of targets placed from it takes a node
// per pod while it can, and relaxes the term, as any preference, when it
// cannot. Pods with required pod affinity to them then find as many
// nodes to join as there are targets, as they do in Karpenter, whose
// scheduler puts each pod on the in-flight claim with the fewest pods.
// The copy stands for the group only; plans list the pods as given.
func apartOnHostname(pod *corev1.Pod) *corev1.Pod {
	hinted := *pod
	hinted.Spec = *pod.Spec.DeepCopy()
	if hinted.Spec.Affinity == nil {
		hinted.Spec.Affinity = &corev1.Affinity{}
	}
	if hinted.Spec.Affinity.PodAntiAffinity == nil {
		hinted.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	anti := hinted.Spec.Affinity.PodAntiAffinity
	anti.PreferredDuringSchedulingIgnoredDuringExecution = append(anti.PreferredDuringSchedulingIgnoredDuringExecution, corev1.WeightedPodAffinityTerm{
		Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(pod.Labels)}}})
	return &hinted
}
