package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

type solver struct {
	pods     []*podInfo
	pools    []*pool
	existing []*existing
	claims   []*claim
}

// podInfo is a pending pod with what the solver needs precomputed.
type podInfo struct {
	pod      *corev1.Pod
	requests corev1.ResourceList
	// terms are the alternatives of its required node affinity (each ANDed
	// with its nodeSelector); the pod fits a node matching any one.
	terms []scheduling.Requirements
	// termKeys identify each term textually, so a claim can skip re-filtering
	// its instance types for a term it has already absorbed.
	termKeys []string
}

func newPodInfo(pod *corev1.Pod) *podInfo {
	p := &podInfo{pod: pod, requests: resources.RequestsForPods(pod)}
	selector := fmt.Sprint(pod.Spec.NodeSelector) // fmt sorts map keys
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) == 0 {
		p.terms = []scheduling.Requirements{scheduling.NewLabelRequirements(pod.Spec.NodeSelector)}
		p.termKeys = []string{selector}
		return p
	}
	for _, t := range terms {
		reqs := scheduling.NewLabelRequirements(pod.Spec.NodeSelector)
		reqs.Add(scheduling.NewNodeSelectorRequirements(t.MatchExpressions...).Values()...)
		p.terms = append(p.terms, reqs)
		p.termKeys = append(p.termKeys, selector+fmt.Sprint(t.MatchExpressions))
	}
	return p
}

func newSolver(in Input) *solver {
	s := &solver{}
	for _, pod := range in.Pods {
		s.pods = append(s.pods, newPodInfo(pod))
	}
	// First-fit decreasing: biggest pods first, then a stable name order.
	slices.SortStableFunc(s.pods, func(a, b *podInfo) int {
		return cmp.Or(
			-a.requests.Cpu().Cmp(*b.requests.Cpu()),
			-a.requests.Memory().Cmp(*b.requests.Memory()),
			cmp.Compare(a.pod.Namespace, b.pod.Namespace),
			cmp.Compare(a.pod.Name, b.pod.Name),
		)
	})
	s.pools = newPools(in)
	s.existing = newExisting(in, s.pools)
	return s
}

func (s *solver) placeOnExisting(p *podInfo) bool {
	for _, e := range s.existing {
		if e.taints.ToleratesPod(p.pod) != nil || !resources.Fits(p.requests, e.available) {
			continue
		}
		if !slices.ContainsFunc(p.terms, func(t scheduling.Requirements) bool { return e.compatible(t) }) {
			continue
		}
		e.available = resources.Subtract(e.available, p.requests)
		e.placed = append(e.placed, p.pod)
		return true
	}
	return false
}

func (s *solver) placeOnNewClaim(p *podInfo) bool {
	for _, c := range s.claims {
		if c.add(p) {
			return true
		}
	}
	for _, pl := range s.pools {
		if c := pl.open(p); c != nil {
			s.claims = append(s.claims, c)
			return true
		}
	}
	return false
}

// explain says why no pool could take p, pool by pool.
func (s *solver) explain(p *podInfo) string {
	if len(s.pools) == 0 {
		return "no NodePool exists; create a karpenter.sh/v1 NodePool whose AKSNodeClass exists"
	}
	var reasons []string
	allTaints := true
	for _, pl := range s.pools {
		reason, taint := pl.explain(p)
		allTaints = allTaints && taint
		reasons = append(reasons, reason)
	}
	if allTaints {
		return "no NodePool tolerated: " + strings.Join(reasons, "; ")
	}
	return strings.Join(reasons, "; ")
}

// existing is a Node, or a NodeClaim whose Node has not joined yet.
type existing struct {
	node, claim string
	reqs        scheduling.Requirements
	// wellKnownMayBeUndefined is true for in-flight claims: their
	// requirements leave some well-known labels open until launch.
	wellKnownMayBeUndefined bool
	taints                  scheduling.Taints
	available               corev1.ResourceList
	placed                  []*corev1.Pod
}

func (e *existing) compatible(t scheduling.Requirements) bool {
	if e.wellKnownMayBeUndefined {
		return e.reqs.Compatible(t, allowWellKnown) == nil
	}
	return e.reqs.Compatible(t) == nil
}

func newExisting(in Input, pools []*pool) []*existing {
	poolsByName := map[string]*pool{}
	for _, pl := range pools {
		poolsByName[pl.np.Name] = pl
	}
	bound := map[string][]*corev1.Pod{}
	for _, pod := range in.BoundPods {
		if pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
		}
	}
	nodes := map[string]*corev1.Node{}
	nodesByProviderID := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
		if n.Spec.ProviderID != "" {
			nodesByProviderID[n.Spec.ProviderID] = n
		}
	}
	claimOfNode := map[string]*karpv1.NodeClaim{}
	var inFlight []*karpv1.NodeClaim
	for _, nc := range in.NodeClaims {
		n := nodes[nc.Status.NodeName]
		if n == nil && nc.Status.ProviderID != "" {
			n = nodesByProviderID[nc.Status.ProviderID]
		}
		if n != nil {
			claimOfNode[n.Name] = nc
		} else if nc.DeletionTimestamp == nil {
			inFlight = append(inFlight, nc)
		}
	}

	var out []*existing
	for _, n := range sortedBy(in.Nodes, func(n *corev1.Node) string { return n.Name }) {
		if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
			continue
		}
		e := &existing{node: n.Name, reqs: scheduling.NewLabelRequirements(n.Labels)}
		var startup []corev1.Taint
		if nc := claimOfNode[n.Name]; nc != nil {
			e.claim = nc.Name
			startup = nc.Spec.StartupTaints
		}
		for _, t := range n.Spec.Taints {
			// Taints that go away once a node is up do not keep pods off it.
			if !scheduling.IsKnownEphemeralTaint(&t) && !slices.ContainsFunc(startup, func(st corev1.Taint) bool { return st.MatchTaint(&t) }) {
				e.taints = append(e.taints, t)
			}
		}
		e.available = resources.Subtract(n.Status.Allocatable, resources.RequestsForPods(bound[n.Name]...))
		out = append(out, e)
	}
	for _, nc := range sortedBy(inFlight, func(nc *karpv1.NodeClaim) string { return nc.Name }) {
		pl := poolsByName[nc.Labels[karpv1.NodePoolLabelKey]]
		reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
		reqs.Add(scheduling.NewLabelRequirements(nc.Labels).Values()...)
		available := inFlightAllocatable(nc, reqs, pl, in.Catalog)
		if available == nil {
			continue // neither launched nor naming a known instance type: no capacity to count on
		}
		// Daemonset pods will land there too, and allocatable is reported
		// before they run.
		if pl != nil {
			available = resources.Subtract(available, pl.daemon)
		}
		available = resources.Subtract(available, resources.RequestsForPods(bound[nc.Status.NodeName]...))
		out = append(out, &existing{
			claim: nc.Name, reqs: reqs, taints: nc.Spec.Taints, available: available,
			wellKnownMayBeUndefined: true,
		})
	}
	return out
}

// inFlightAllocatable is a launched claim's reported allocatable, else the
// smallest of the instance types its requirements allow (component-wise, so
// whichever one launches has at least that much).
func inFlightAllocatable(nc *karpv1.NodeClaim, reqs scheduling.Requirements, pl *pool, c *catalog.Catalog) corev1.ResourceList {
	if len(nc.Status.Allocatable) > 0 {
		return nc.Status.Allocatable.DeepCopy()
	}
	if c == nil || !reqs.Has(corev1.LabelInstanceTypeStable) {
		return nil
	}
	maxPods := v1beta1.DefaultMaxPods
	if pl != nil {
		maxPods = pl.maxPods
	}
	var allocs []corev1.ResourceList
	for _, name := range reqs.Get(corev1.LabelInstanceTypeStable).Values() {
		if it, ok := c.Get(name); ok {
			allocs = append(allocs, it.WithMaxPods(maxPods).Allocatable())
		}
	}
	if len(allocs) == 0 {
		return nil
	}
	return resources.MinResources(allocs...)
}

func sortedBy[T any](in []T, key func(T) string) []T {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// fitsLimits reports whether capacity stays within remaining for every
// limited resource.
func fitsLimits(capacity, remaining corev1.ResourceList) bool {
	for name, left := range remaining {
		if q, ok := capacity[name]; ok && q.Cmp(left) > 0 {
			return false
		}
	}
	return true
}

func describe(name corev1.ResourceName, q resource.Quantity) string {
	if name == corev1.ResourceCPU {
		return fmt.Sprintf("%g vCPU", q.AsApproximateFloat64())
	}
	if name == corev1.ResourceMemory {
		return fmt.Sprintf("%.1fGi memory", q.AsApproximateFloat64()/(1<<30))
	}
	return fmt.Sprintf("%s %s", q.String(), name)
}
