package differential

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// scenario is one cluster as a user migrating from Karpenter has it: their
// NodePools (all on the AKSNodeClass "default"), DaemonSets, nodes already
// running (each with its NodeClaim and bound pods) and pending pods.
type scenario struct {
	Seed       int64
	NodePools  []*karpv1.NodePool
	DaemonSets []*appsv1.DaemonSet
	Nodes      []*corev1.Node
	NodeClaims []*karpv1.NodeClaim
	Bound      []*corev1.Pod
	Pods       []*corev1.Pod
}

// deepCopy keeps one scheduler's run from seeing another's changes.
func (sc *scenario) deepCopy() *scenario {
	out := &scenario{Seed: sc.Seed}
	for _, np := range sc.NodePools {
		out.NodePools = append(out.NodePools, np.DeepCopy())
	}
	for _, ds := range sc.DaemonSets {
		out.DaemonSets = append(out.DaemonSets, ds.DeepCopy())
	}
	for _, n := range sc.Nodes {
		out.Nodes = append(out.Nodes, n.DeepCopy())
	}
	for _, nc := range sc.NodeClaims {
		out.NodeClaims = append(out.NodeClaims, nc.DeepCopy())
	}
	for _, p := range sc.Bound {
		out.Bound = append(out.Bound, p.DeepCopy())
	}
	for _, p := range sc.Pods {
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	return out
}

// newNode is a NodeClaim a plan creates, launched as the cheapest
// available offering of its instance type options that its requirements
// allow (price, then type name, zone, capacity type), as the Azure
// provider and karpfunc's launcher both launch.
type newNode struct {
	Name, Pool   string
	Type         *catalog.InstanceType
	Zone         string
	CapacityType string
	Price        float64
	Options      []string
	Requirements scheduling.Requirements
	Pods         []*corev1.Pod
}

// plan is one scheduler's answer in terms the checks read.
type plan struct {
	Who        string
	New        []*newNode
	OnExisting map[string][]*corev1.Pod // node name -> pending pods put there
	Pending    map[string]string        // pod name -> reason
	// Invalid is why the plan could not be read (a claim without a
	// launchable offering, a pod placed twice or not accounted for).
	Invalid []string
}

// Price is the hourly price of the new nodes.
func (p *plan) Price() float64 {
	total := 0.0
	for _, n := range p.New {
		total += n.Price
	}
	return total
}

// Placed names the pods the plan puts somewhere, sorted.
func (p *plan) Placed() []string {
	var out []string
	for _, n := range p.New {
		for _, pod := range n.Pods {
			out = append(out, pod.Name)
		}
	}
	for _, pods := range p.OnExisting {
		for _, pod := range pods {
			out = append(out, pod.Name)
		}
	}
	sort.Strings(out)
	return out
}

// launch picks what a claim becomes: the cheapest available offering of
// its options allowed by its requirements.
func launch(cat *catalog.Catalog, options []string, reqs scheduling.Requirements) (*catalog.InstanceType, catalog.Offering, bool) {
	var best *catalog.InstanceType
	var bestOffering catalog.Offering
	for _, name := range options {
		it := typeByName(cat, name)
		for _, o := range it.Offerings {
			if !o.Available || !allows(reqs, corev1.LabelTopologyZone, o.Zone) || !allows(reqs, karpv1.CapacityTypeLabelKey, o.CapacityType) {
				continue
			}
			if best == nil || cmp.Or(cmp.Compare(o.Price, bestOffering.Price), cmp.Compare(it.Name, best.Name),
				cmp.Compare(o.Zone, bestOffering.Zone), cmp.Compare(o.CapacityType, bestOffering.CapacityType)) < 0 {
				best, bestOffering = it, o
			}
		}
	}
	return best, bestOffering, best != nil
}

// allows reports whether requirements admit key=value (a key they do not
// constrain admits every value).
func allows(reqs scheduling.Requirements, key, value string) bool {
	if !reqs.Has(key) {
		return true
	}
	return reqs.Get(key).Has(value)
}

// addNew appends a launched claim to the plan, or records why it cannot
// be launched.
func (p *plan) addNew(cat *catalog.Catalog, pool string, options []string, reqs scheduling.Requirements, pods []*corev1.Pod) {
	it, offering, ok := launch(cat, options, reqs)
	if !ok {
		p.Invalid = append(p.Invalid, fmt.Sprintf("a claim of NodePool %s has no available offering among %v under %s", pool, options, reqs))
		return
	}
	p.New = append(p.New, &newNode{
		Name: fmt.Sprintf("%s-new-%d", p.Who, len(p.New)), Pool: pool, Type: it, Zone: offering.Zone, CapacityType: offering.CapacityType,
		Price: offering.Price, Options: options, Requirements: reqs, Pods: pods,
	})
}

// account checks that every pending pod of the scenario appears exactly
// once in the plan.
func (p *plan) account(sc *scenario) {
	seen := map[string]int{}
	for _, name := range p.Placed() {
		seen[name]++
	}
	for name := range p.Pending {
		seen[name]++
	}
	for _, pod := range sc.Pods {
		if seen[pod.Name] != 1 {
			p.Invalid = append(p.Invalid, fmt.Sprintf("pod %s appears %d times in the plan", pod.Name, seen[pod.Name]))
		}
		delete(seen, pod.Name)
	}
	for name := range seen {
		p.Invalid = append(p.Invalid, fmt.Sprintf("the plan places %s, which is not a pending pod", name))
	}
}

// String is the plan in a few lines.
func (p *plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s plan ($%.4f/h):\n", p.Who, p.Price())
	for _, n := range p.New {
		fmt.Fprintf(&b, "  new %s: NodePool %s, %s %s %s $%.4f/h, pods %s (options %d: %s)\n", n.Name, n.Pool, n.Type.Name, n.Zone, n.CapacityType, n.Price,
			podNames(n.Pods), len(n.Options), strings.Join(firstN(n.Options, 6), ","))
	}
	var nodes []string
	for name := range p.OnExisting {
		nodes = append(nodes, name)
	}
	slices.Sort(nodes)
	for _, name := range nodes {
		fmt.Fprintf(&b, "  existing %s: + pods %s\n", name, podNames(p.OnExisting[name]))
	}
	var pending []string
	for name := range p.Pending {
		pending = append(pending, name)
	}
	slices.Sort(pending)
	for _, name := range pending {
		fmt.Fprintf(&b, "  pending %s: %s\n", name, oneLine(p.Pending[name], 200))
	}
	for _, why := range p.Invalid {
		fmt.Fprintf(&b, "  invalid: %s\n", why)
	}
	return b.String()
}

func podNames(pods []*corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return "[" + strings.Join(names, " ") + "]"
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), "...")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
