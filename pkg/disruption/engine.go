package disruption

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// DisruptedTaint is put on a node that is about to be disrupted.
var DisruptedTaint = corev1.Taint{Key: karpv1.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}

// Engine holds what every method shares: candidates, the base scheduler
// input and the price of every managed node.
type Engine struct {
	st         State
	base       scheduler.Input
	Candidates []*Candidate
	// podsOn: pods bound to each node that consume capacity.
	podsOn     map[string][]*corev1.Pod
	unusable   map[string]bool // node names that are not capacity (leaving)
	blocked    map[string]Refusal
	budgets    Budgets
	budgetErrs []error
	next       time.Time
	pending    int
	poolCost   map[string]float64
	poolDisr   map[string]float64
	expired    []*karpv1.NodeClaim
	fleetCache *fleet
	// rebalanceCache: see rebalancer.
	rebalanceCache *rebalancer
	// interPod: some pod's required anti-affinity keeps others away, so
	// simulations must see every node.
	interPod bool
	pdbs     []pdb
	started  time.Time
	// holds: State.DriftHold's answers, by drift reason.
	holds map[string]askedHold
	// bufferRooms: see placeBuffers.
	bufferRooms map[string]*capacitybuffer.Room
}

// outOfTime: Options.TimeLimit has passed since the engine was made.
func (e *Engine) outOfTime() bool {
	return e.st.Options.TimeLimit > 0 && time.Since(e.started) > e.st.Options.TimeLimit
}

type pdb struct {
	obj      *policyv1.PodDisruptionBudget
	selector labels.Selector
}

// NewEngine prepares a decision over st.
func NewEngine(st State) *Engine {
	cluster := st.Cluster
	engine := &Engine{st: st, podsOn: map[string][]*corev1.Pod{}, unusable: map[string]bool{}, blocked: map[string]Refusal{},
		poolCost: map[string]float64{}, poolDisr: map[string]float64{}, started: time.Now(), holds: map[string]askedHold{}}
	engine.base = cluster.Input(st.Catalog, snapshot.Live)
	engine.base.DefaultMaxPods = st.Options.DefaultMaxPods
	engine.base.PoolCatalogs = st.PoolCatalogs
	// Every simulation solves against the same nodes, bound pods and
	// catalog: derive from them once.
	engine.base.Memo = scheduler.NewMemo()
	engine.pending = len(engine.base.Pods)
	for _, pod := range engine.base.BoundPods {
		engine.podsOn[pod.Spec.NodeName] = append(engine.podsOn[pod.Spec.NodeName], pod)
		engine.interPod = engine.interPod || requiredAntiAffinity(pod)
	}
	engine.readPDBs(cluster)
	counts := engine.readNodeClaims(cluster)
	engine.budgets, engine.budgetErrs = computeBudgets(cluster.NodePools, counts, st.Now)
	sort.SliceStable(engine.Candidates, func(i, j int) bool {
		first := engine.Candidates[i]
		second := engine.Candidates[j]
		if first.DisruptionCost != second.DisruptionCost {
			return first.DisruptionCost < second.DisruptionCost
		}
		return first.Name() < second.Name()
	})
	engine.placeBuffers()
	return engine
}

func (e *Engine) readPDBs(cluster *snapshot.Cluster) {
	for _, podBudget := range cluster.PodDisruptionBudgets {
		sel, err := metav1.LabelSelectorAsSelector(podBudget.Spec.Selector)
		if err != nil {
			sel = labels.Everything() // an unreadable selector blocks, as the eviction API would fail
		}
		e.pdbs = append(e.pdbs, pdb{obj: podBudget, selector: sel})
	}
}

// readNodeClaims sorts every NodeClaim of a NodePool into expired,
// leaving, blocked (with why) or candidate, and counts each NodePool's
// nodes for its budgets.
func (e *Engine) readNodeClaims(cluster *snapshot.Cluster) map[string]*poolCount {
	pools := map[string]*karpv1.NodePool{}
	for _, np := range cluster.NodePools {
		pools[np.Name] = np
	}
	nodes := map[string]*corev1.Node{}
	for _, node := range cluster.Nodes {
		nodes[node.Name] = node
	}
	want := desired{classes: classIndex(cluster), versions: e.st.Versions}
	counts := map[string]*poolCount{}
	for _, nc := range cluster.NodeClaims {
		np := pools[nc.Labels[karpv1.NodePoolLabelKey]]
		if np == nil {
			continue // not ours to disrupt
		}
		count := counts[np.Name]
		if count == nil {
			count = &poolCount{}
			counts[np.Name] = count
		}
		e.readNodeClaim(nc, nodes[nc.Status.NodeName], np, want, count)
	}
	return counts
}

// readNodeClaim sorts one NodeClaim of np (see readNodeClaims).
func (e *Engine) readNodeClaim(nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, want desired, count *poolCount) {
	if at, ok := expiresAt(nc); ok && nc.DeletionTimestamp == nil {
		if !at.After(e.st.Now) {
			e.expired = append(e.expired, nc)
			return
		}
		e.noteNext(at)
	}
	leaving := nc.DeletionTimestamp != nil || (node != nil && (node.DeletionTimestamp != nil || hasDisruptedTaint(node)))
	if node != nil {
		count.total++
		if leaving || !nodeReady(node) {
			count.disrupting++
		}
		if leaving {
			e.unusable[node.Name] = true
		}
	}
	if leaving {
		return
	}
	cand, why := e.candidate(nc, node, np, want)
	if cand == nil {
		e.blocked[nc.Name] = Refusal{NodeClaim: nc.Name, Blocked: true, Reason: why}
		return
	}
	e.poolCost[np.Name] += cand.Price
	e.poolDisr[np.Name] += cand.DisruptionCost
	if why != "" {
		e.blocked[nc.Name] = Refusal{NodeClaim: nc.Name, Blocked: true, Reason: why}
		return
	}
	e.Candidates = append(e.Candidates, cand)
}

type poolCount struct{ total, disrupting int }

func (e *Engine) noteNext(at time.Time) {
	if at.After(e.st.Now) && (e.next.IsZero() || at.Before(e.next)) {
		e.next = at
	}
}

// Expired NodeClaims are past their expireAfter.
func (e *Engine) Expired() []*karpv1.NodeClaim { return e.expired }

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, condition := range n.Status.Conditions {
		if condition.Type == corev1.NodeReady {
			return condition.Status == corev1.ConditionTrue
		}
	}
	return false
}

// candidate builds the Candidate for nc. A nil Candidate means nc is not
// a node yet (or not a managed one); a non-empty reason with a Candidate
// means it is priced and counted but may not be disrupted.
func (e *Engine) candidate(nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, want desired) (*Candidate, string) {
	if node == nil {
		return nil, "NodeClaim has no Node yet"
	}
	if !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		return nil, "NodeClaim is not Initialized"
	}
	candidate := &Candidate{NodeClaim: nc, Node: node, NodePool: np,
		InstanceType: labelOf(nc, node, corev1.LabelInstanceTypeStable),
		Zone:         labelOf(nc, node, corev1.LabelTopologyZone),
		CapacityType: labelOf(nc, node, karpv1.CapacityTypeLabelKey)}
	candidate.Price = e.price(np, candidate.InstanceType, candidate.Zone, candidate.CapacityType)
	candidate.DisruptionCost = 1
	why := ""
	for _, pod := range e.podsOn[node.Name] {
		if !reschedulable(pod) {
			continue
		}
		candidate.Pods = append(candidate.Pods, pod)
		candidate.DisruptionCost += podCost(pod)
		if why == "" {
			why = e.podBlocks(pod)
		}
	}
	if at, ok := consolidatableAt(nc, np); ok {
		candidate.Consolidatable = !at.After(e.st.Now)
		e.noteNext(at)
	}
	candidate.Drift = drift(nc, node, np, want)
	e.holdDrift(candidate)
	if !nodeReady(node) {
		return candidate, "Node is not Ready"
	}
	for _, value := range []string{node.Annotations[karpv1.DoNotDisruptAnnotationKey], nc.Annotations[karpv1.DoNotDisruptAnnotationKey]} {
		if value == "true" {
			return candidate, "node has the karpenter.sh/do-not-disrupt annotation"
		}
	}
	return candidate, why
}

// holdDrift marks c's drift held when State.DriftHold says so, and
// notes when the hold may lift (the next pass).
func (e *Engine) holdDrift(c *Candidate) {
	if c.Drift == "" || e.st.DriftHold == nil {
		return
	}
	reason, _, _ := strings.Cut(c.Drift, ":")
	hold, ok := e.holds[reason]
	if !ok {
		hold.Hold, hold.held = e.st.DriftHold(reason)
		e.holds[reason] = hold
	}
	if !hold.held {
		return
	}
	c.DriftHeld = "drifted (" + c.Drift + ") but " + hold.Reason
	e.noteNext(hold.Until)
}

// askedHold is State.DriftHold's answer for one reason.
type askedHold struct {
	Hold
	held bool
}

func labelOf(nc *karpv1.NodeClaim, n *corev1.Node, key string) string {
	if value := nc.Labels[key]; value != "" {
		return value
	}
	return n.Labels[key]
}

// price is the $/hour of an offering as np sees it (its NodeOverlays
// applied).
func (e *Engine) price(np *karpv1.NodePool, typ, zone, ct string) float64 {
	cat := e.st.Catalog
	if np != nil {
		cat = e.base.CatalogFor(np.Name)
	}
	if cat == nil {
		return 0
	}
	it, ok := cat.Get(typ)
	if !ok {
		return 0
	}
	for _, offering := range it.Offerings {
		if offering.Zone == zone && offering.CapacityType == ct {
			return offering.Price
		}
	}
	return 0
}

// reschedulable: a pod that needs a place elsewhere when its node goes.
func reschedulable(p *corev1.Pod) bool {
	if snapshot.Finished(p) || snapshot.OwnedByDaemonSet(p) || p.DeletionTimestamp != nil {
		return false
	}
	_, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]
	return !mirror
}

// podBlocks says why p may not be evicted now ("" if it may).
func (e *Engine) podBlocks(p *corev1.Pod) string {
	if value, ok := p.Annotations[karpv1.DoNotDisruptAnnotationKey]; ok {
		if value == "true" {
			return fmt.Sprintf("pod %s/%s has the karpenter.sh/do-not-disrupt annotation", p.Namespace, p.Name)
		}
		duration, err := time.ParseDuration(value)
		if err != nil {
			return fmt.Sprintf("pod %s/%s has karpenter.sh/do-not-disrupt=%q, which is neither \"true\" nor a duration", p.Namespace, p.Name, value)
		}
		start := p.CreationTimestamp.Time
		if p.Status.StartTime != nil {
			start = p.Status.StartTime.Time
		}
		if until := start.Add(duration); until.After(e.st.Now) {
			e.noteNext(until)
			return fmt.Sprintf("pod %s/%s has karpenter.sh/do-not-disrupt until %s", p.Namespace, p.Name, until.UTC().Format(time.RFC3339))
		}
	}
	var matched []string
	for _, podBudget := range e.pdbs {
		if podBudget.obj.Namespace != p.Namespace || !podBudget.selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		matched = append(matched, podBudget.obj.Name)
		if podBudget.obj.Status.DisruptionsAllowed <= 0 {
			return fmt.Sprintf("pdb %s/%s prevents pod evictions (pod %s)", podBudget.obj.Namespace, podBudget.obj.Name, p.Name)
		}
	}
	if len(matched) > 1 {
		return fmt.Sprintf("pod %s/%s is matched by several PDBs (%v); the eviction API refuses such pods", p.Namespace, p.Name, matched)
	}
	return ""
}

// podCost is Karpenter's eviction cost: 1 + deletion cost/2^27 +
// priority/2^25, clamped to [-10, 10].
func podCost(p *corev1.Pod) float64 {
	cost := 1.0
	if value, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		if deletionCost, err := strconv.ParseFloat(value, 64); err == nil {
			cost += deletionCost / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Max(-10, math.Min(10, cost))
}

// consolidatableAt is when nc becomes Consolidatable: consolidateAfter
// after its last pod event (or its initialization). false: Never.
func consolidatableAt(nc *karpv1.NodeClaim, np *karpv1.NodePool) (time.Time, bool) {
	after := np.Spec.Disruption.ConsolidateAfter.Duration
	// A static NodePool's nodes are never consolidated (Karpenter's
	// pkg/controllers/nodeclaim/disruption/controller.go:136-141).
	if after == nil || np.Spec.Replicas != nil {
		return time.Time{}, false
	}
	since := nc.Status.LastPodEventTime.Time
	if init := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized); init != nil && init.LastTransitionTime.After(since) {
		since = init.LastTransitionTime.Time
	}
	return since.Add(*after), true
}

// ConsolidatableAt is exported for the Disruption function, which keeps
// the NodeClaim's Consolidatable condition.
func ConsolidatableAt(nc *karpv1.NodeClaim, np *karpv1.NodePool) (time.Time, bool) {
	return consolidatableAt(nc, np)
}

func (e *Engine) notConsolidatableWhy(c *Candidate) string {
	at, ok := consolidatableAt(c.NodeClaim, c.NodePool)
	switch {
	case !ok && c.NodePool.Spec.Replicas != nil:
		return "NodePool is static (spec.replicas): its nodes are never consolidated"
	case !ok:
		return "consolidateAfter is Never"
	}
	return "not consolidatable until " + at.UTC().Format(time.RFC3339) + " (consolidateAfter since the last pod event)"
}
