package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/coverlp"
)

type solver struct {
	res      *resIndex
	dom      *domains
	typeKeys map[string]bool
	pools    []*pool
	// preferNoSchedule: some pool has a PreferNoSchedule taint, so pods
	// may relax into tolerating it.
	preferNoSchedule bool
	counters         counters
	groups           []*group
	order            []pendingPod
	// bins: existing capacity first, then new claims in creation order;
	// active are those that may still take a pod.
	bins    []*bin
	active  []*bin
	closed  int
	minReq  resVec
	current *corev1.Pod
	// prefer is the current pod's preferred type in preferPool.
	prefer     *ptype
	preferPool *pool
	// slack is the mean pending pod's CPU and memory (see usable).
	slack [2]float64
	// lastWhy is, per pool, why the last new claim could not take a pod
	// for topology reasons.
	lastWhy []string
	// spread: Input.Spread.
	spread bool
	// packLargest: Input.PackLargest.
	packLargest bool
	// reach: zoneReach, computed once.
	reach []int
	// byQueue orders the pods as Karpenter's queue does (see queueOrder)
	// instead of for cost (see orderPods).
	byQueue bool
	// pastTarget lets a claim take a pod that fits one of its options
	// but not its target (see growOpen).
	pastTarget bool
	// index finds the open bins with room for a pod (see binIndex);
	// linearScan tries every open bin instead, as the index's tests
	// compare.
	index      *binIndex
	linearScan bool
	// labelReqs builds existing nodes' requirements from shared parts.
	labelReqs *labelRequirements
	// memo: Input.Memo.
	memo *Memo
	// hostMin: the last-resort pass is on (see placeOnNodesThatExist):
	// hostname spread measures skew against the least count over the
	// nodes that exist or are planned, and no new claim is opened.
	hostMin bool
	// hostMinPlaced: a pod went where only that rule allows it, so no
	// claim with none of its replicas may be added afterwards.
	hostMinPlaced bool
	// wholeGroup: the current pod is the first of replicas that must
	// share a node, and goes only where all of them fit (see place).
	wholeGroup bool
	// commits counts the pods committed to bins (see hostMinimum).
	commits int
	// unseenNodes: the input has nodes that are no bin (cordoned or
	// being deleted, or an in-flight claim of unknown capacity); the
	// kube-scheduler still counts them as hostname domains.
	unseenNodes bool
	// quota: Input.Quota, charged as claims open (nil: unlimited).
	quota *quotaBudget
}

type pendingPod struct {
	pod *corev1.Pod
	g   *group
	req resVec
	// prefer is the type a new claim for this pod should be in
	// preferPool (see divide and tooBigFirst); nil: the pool's most
	// cost-efficient type.
	prefer *ptype
}

func newSolver(in Input, byQueue bool) *solver {
	return newSolverFor(in, byQueue, nil)
}

// newSolverFor is newSolver with the pods targets selects spread over
// nodes (see spreadTargets).
func newSolverFor(in Input, byQueue bool, targets spreadTargets) *solver {
	s := &solver{
		res:      newResIndex(),
		dom:      &domains{zoneIdx: map[string]int{}, custom: map[string]*valueTable{}},
		typeKeys: map[string]bool{},
		counters: counters{byKey: map[string]*counter{}},
		spread:   in.Spread,

		labelReqs: newLabelRequirements(),
		memo:      in.Memo,

		packLargest: in.PackLargest,
		byQueue:     byQueue,
		quota:       newQuotaBudget(in.Quota),
	}
	pods, requests := s.collectPods(in)
	s.internCatalog(in.Catalog)
	s.newPools(in)
	s.lastWhy = make([]string, len(s.pools))
	s.internPoolValues()
	s.groupPods(in, pods, requests, targets)
	if !s.spread {
		s.orderPods()
	}
	s.setMinReq()

	s.index = newBinIndex(len(s.res.names))
	s.counters.setNamespaces(in.Namespaces, in.Pods, in.BoundPods)
	s.internGroupCounters()
	bound := s.boundByNode(in.BoundPods, in.Memo, len(in.Nodes))
	s.matchGroupCounters()
	s.newExisting(in, bound)
	return s
}

// collectPods returns the input's pods with their requests, registering
// every resource they name.
func (s *solver) collectPods(in Input) ([]*corev1.Pod, []corev1.ResourceList) {
	var requests []corev1.ResourceList
	var pods []*corev1.Pod
	for _, pod := range in.Pods {
		if pod == nil {
			continue
		}
		var rl corev1.ResourceList
		if in.Memo != nil {
			rl = in.Memo.podRequests(pod) // computed once across solves
		} else {
			rl = requestsForPod(pod)
		}
		for name := range rl {
			s.res.add(name)
		}
		pods = append(pods, pod)
		requests = append(requests, rl)
	}
	return pods, requests
}

// internCatalog registers the catalog's zones and instance-type label keys.
func (s *solver) internCatalog(cat *catalog.Catalog) {
	if cat == nil {
		return
	}
	for _, zone := range cat.Zones {
		s.dom.zone(zone)
	}
	for _, it := range cat.InstanceTypes {
		if it == nil {
			continue
		}
		for key := range it.Labels {
			s.typeKeys[key] = true
		}
		for _, offering := range it.Offerings {
			s.dom.zone(offering.Zone)
		}
	}
	for _, key := range catalog.SKULabels {
		s.typeKeys[key] = true
	}
}

// internPoolValues notes whether any pool has a PreferNoSchedule taint
// and interns the values of the pools' custom requirements.
func (s *solver) internPoolValues() {
	for _, pl := range s.pools {
		s.preferNoSchedule = s.preferNoSchedule || pl.preferNoSchedule
		for key, req := range pl.reqs {
			if kindOf(key) != keyCustom {
				continue
			}
			table := s.dom.table(key)
			for _, value := range req.Values() {
				table.intern(value)
			}
		}
	}
}

// groupPods groups identical pods and queues every pod in input order.
func (s *solver) groupPods(in Input, pods []*corev1.Pod, requests []corev1.ResourceList, targets spreadTargets) {
	byKey := map[string]*group{}
	volumes := newVolumes(in)
	for i, pod := range pods {
		req := s.res.vec(requests[i])
		req[rPods] = 1 // as resources.RequestsForPods counts it
		key := groupKey(pod, req)
		podGroup := byKey[key]
		if podGroup == nil {
			podGroup = &group{id: len(s.groups), pod: pod, ns: pod.Namespace, labels: labels.Set(pod.Labels), req: req, ports: podHostPorts(pod)}
			podGroup.volumeReqs, podGroup.volumeErr = volumes.requirements(pod)
			if len(pod.Labels) > 0 && targets.selects(pod) && !podGroup.selfAffine() {
				podGroup.pod, podGroup.apart = apartOnHostname(pod), true
			}
			if zones := targets.zonesFor(pod); len(pod.Labels) > 0 && zones != nil {
				podGroup.pod = inZones(podGroup.pod, zones)
			}
			byKey[key] = podGroup
			s.groups = append(s.groups, podGroup)
		}
		podGroup.pending++
		s.order = append(s.order, pendingPod{pod: pod, g: podGroup, req: req})
	}
}

// setMinReq sets minReq to the element-wise minimum of the groups'
// requests (nil without groups).
func (s *solver) setMinReq() {
	s.minReq = nil
	for _, group := range s.groups {
		if s.minReq == nil {
			s.minReq = group.req.clone()
		}
		for i, value := range group.req {
			s.minReq[i] = min(s.minReq[i], value)
		}
	}
}

// internGroupCounters interns every counter any pod could use, so that
// each group knows which it affects, and the counters each group's
// required anti-affinity owns.
func (s *solver) internGroupCounters() {
	for _, group := range s.groups {
		s.internCounters(group.pod, group.ns)
		reqAnti, _ := podAntiAffinity(group.pod)
		for _, term := range reqAnti {
			if counter, err := s.counters.forTerm(term, group.ns, true); err == nil {
				group.owned = append(group.owned, counter)
			}
		}
	}
}

// boundByNode returns what the running bound pods take, by node name:
// their requests, summed, and the counters each one counts in. The pods
// are read in one pass, in input order (the order they were decoded and
// laid out in memory in), and not again. nodeCount sizes the map.
func (s *solver) boundByNode(boundPods []*corev1.Pod, memo *Memo, nodeCount int) map[string]*boundOnNode {
	byNamespace := newCountersByNamespace(&s.counters)
	owners := newOwnerCounters(&s.counters)
	bound := make(map[string]*boundOnNode, nodeCount)
	for _, pod := range boundPods {
		if !runningBound(pod) {
			continue
		}
		onNode := bound[pod.Spec.NodeName]
		if onNode == nil {
			onNode = &boundOnNode{requested: make([]resource.Quantity, len(s.res.names))}
			bound[pod.Spec.NodeName] = onNode
		}
		s.addBoundPod(onNode, pod, memo)
		// The counters it matches, then those its required anti-affinity
		// owns.
		onNode.counted = byNamespace.matched(pod, onNode.counted)
		onNode.counted = owners.appendOwned(pod, onNode.counted)
	}
	return bound
}

// runningBound reports whether pod is bound to a node and not finished.
func runningBound(pod *corev1.Pod) bool {
	return pod != nil && pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// matchGroupCounters lists, for each group, the counters its pods match:
// owner counters block it, the others count it.
func (s *solver) matchGroupCounters() {
	for _, group := range s.groups {
		for _, counter := range s.counters.all {
			if !counter.matches(group.ns, group.labels) {
				continue
			}
			if counter.owners {
				group.blockers = append(group.blockers, counter)
			} else {
				group.matched = append(group.matched, counter)
			}
		}
	}
}

// requestsForPod is resources.RequestsForPods(pod) less its "pods" entry
// (the caller counts the pod): for the common pod, one container and
// nothing else that changes requests, it is the container's requests,
// read without the maps RequestsForPods allocates for requests, limits
// and their merge.
//
// A running pod's container status changes nothing unless it reports
// resources of its own (an in-place resize) or the pod's resize is
// pending: Karpenter's Ceiling takes max(spec, actuated, allocated), and
// with neither reported both fall back to the spec's requests.
func requestsForPod(pod *corev1.Pod) corev1.ResourceList {
	if len(pod.Spec.Containers) == 1 && len(pod.Spec.InitContainers) == 0 && pod.Spec.Overhead == nil && pod.Spec.Resources == nil &&
		len(pod.Status.InitContainerStatuses) == 0 && pod.Status.Resources == nil && pod.Status.AllocatedResources == nil &&
		len(pod.Status.NodeAllocatableResourceClaimStatuses) == 0 && statusesAtSpec(pod.Status.ContainerStatuses) && !resizePending(pod.Status.Conditions) {
		return pod.Spec.Containers[0].Resources.Requests
	}
	return resources.RequestsForPods(pod)
}

// statusesAtSpec reports whether no container status reports resources
// of its own.
func statusesAtSpec(statuses []corev1.ContainerStatus) bool {
	for i := range statuses {
		if statuses[i].AllocatedResources != nil || (statuses[i].Resources != nil && statuses[i].Resources.Requests != nil) {
			return false
		}
	}
	return true
}

// resizePending reports whether the pod has a PodResizePending condition
// (an infeasible resize makes Ceiling ignore the spec).
func resizePending(conditions []corev1.PodCondition) bool {
	for _, cond := range conditions {
		if cond.Type == corev1.PodResizePending {
			return true
		}
	}
	return false
}

// orderPods sorts pods biggest first, size being CPU and memory at the
// dual prices of the LP that covers them all with the first usable pool's
// types, and then interleaves big and small so that the running average
// size stays at the overall average. First-fit then fills each claim with
// the workload's mix: a claim of the most cost-efficient type runs out of
// CPU and memory together instead of running out of pod slots on a tail of
// small pods.
//
// When that LP's optimum mixes two types of different shapes (a CPU-rich
// type for the CPU-heavy pods, a memory-rich one for the rest) and the mix
// is clearly cheaper than any one type, the pods are first divided between
// the two (see divide): each part is ordered as above with its own mix,
// and its pods prefer to open claims of its type.
//
// When the pool's most cost-efficient type is too small for some pods
// (see smallCheapest), those pods come first and prefer the type that
// covers them most cheaply, and the others prefer the small type (see
// tooBigFirst).
func (s *solver) orderPods() {
	var yCPU, yMem float64
	total := make(resVec, len(s.res.names))
	for _, pending := range s.order {
		total.addInPlace(pending.req)
	}
	if count := float64(len(s.order)); count > 0 {
		s.slack = [2]float64{float64(total[rCPU]) / count, float64(total[rMemory]) / count}
	}
	if s.byQueue {
		slices.SortStableFunc(s.order, queueOrder)
		return
	}
	var parts [][]pendingPod
	var small *ptype
	for _, pl := range s.pools {
		if pl.invalid == "" && len(pl.types) > 0 {
			var basis [2]lpUse
			yCPU, yMem, basis = lpSolve(s.lpTypes(pl), float64(total[rCPU]), float64(total[rMemory]), s.slack)
			parts = s.divide(pl, basis, total)
			if small = s.smallCheapest(pl); small != nil {
				s.preferPool = pl
			}
			break
		}
	}
	// A resource the LP does not price (it has slack) still has to fit:
	// weigh each by its share of the total so neither clusters.
	cpuW, memW := 0.0, 0.0
	if total[rCPU] > 0 {
		cpuW = 1 / float64(total[rCPU])
	}
	if total[rMemory] > 0 {
		memW = 1 / float64(total[rMemory])
	}
	if value := yCPU*float64(total[rCPU]) + yMem*float64(total[rMemory]); value > 0 {
		// Dual prices, as shares of the fleet's value, plus the even weights.
		cpuW += yCPU / value
		memW += yMem / value
	}
	size := func(p pendingPod) float64 { return cpuW*float64(p.req[rCPU]) + memW*float64(p.req[rMemory]) }
	if parts == nil {
		s.order = selfAffineFirst(s.tooBigFirst(arrange(s.order, size), small))
		return
	}
	out := make([]pendingPod, 0, len(s.order))
	for _, part := range parts {
		out = append(out, arrange(part, size)...)
	}
	s.order = selfAffineFirst(s.tooBigFirst(out, small))
}

// smallCheapest is the pool's most cost-efficient type (see byEfficiency)
// when it is more cost-efficient than every type of the LP (lpTypes, those
// that hold the largest pod) and too small for some pending pod; nil
// otherwise. A 2-vCPU burstable priced below every larger size is such a
// type: the pods it holds are cheapest on it, the others need a larger one.
func (s *solver) smallCheapest(pl *pool) *ptype {
	ranked := s.byEfficiency(pl)
	if len(ranked) == 0 || slices.Contains(s.lpTypes(pl), ranked[0]) {
		return nil
	}
	first := ranked[0]
	if !slices.ContainsFunc(s.order, func(p pendingPod) bool { return !p.req.fitsIn(first.room) }) {
		return nil
	}
	return first
}

// tooBigFirst moves the pods that do not fit small ahead of those that
// do, each in their order (nil small: order unchanged), and has each pod
// open claims of the type that covers its side most cheaply: small for
// the pods it holds, for the others the type the LP over the pool's
// lpTypes buys most of for their CPU and memory alone (their memory:CPU
// ratio is not the workload's). First fit then opens the larger claims
// the big pods need before the pods small holds arrive, and these fill
// what room the larger claims have left before opening claims of small,
// instead of every small pod joining a larger claim some pod too big for
// small keeps open.
func (s *solver) tooBigFirst(order []pendingPod, small *ptype) []pendingPod {
	if small == nil {
		return order
	}
	out := make([]pendingPod, 0, len(order))
	big := make(resVec, len(s.res.names))
	for _, pending := range order {
		if !pending.req.fitsIn(small.room) {
			big.addInPlace(pending.req)
			out = append(out, pending)
		}
	}
	_, _, basis := lpSolve(s.lpTypes(s.preferPool), float64(big[rCPU]), float64(big[rMemory]), s.slack)
	bigType := basis[0].t
	if basis[1].t != nil && basis[1].x > basis[0].x {
		bigType = basis[1].t
	}
	for i := range out {
		out[i].prefer = bigType
	}
	for _, pending := range order {
		if pending.req.fitsIn(small.room) {
			pending.prefer = small
			out = append(out, pending)
		}
	}
	return out
}

// selfAffineFirst moves the pods whose required pod affinity selects
// their own kind (replicas that must share a node or zone) to the front,
// in their order, ahead of every part the pods are divided into: replicas
// in different parts would otherwise come apart. The first of them opens a claim and the others follow
// it there (see followers) while it still has room; behind smaller pods
// the first would join a claim they have partly filled, and its replicas
// would find no room next to it. Karpenter's queue, by size only, puts
// such replicas ahead of smaller pods too.
func selfAffineFirst(order []pendingPod) []pendingPod {
	// by group id: 0 not yet asked, 1 self-affine, -1 not
	groups := 0
	for _, pending := range order {
		groups = max(groups, pending.g.id+1)
	}
	known := make([]int8, groups)
	selfAffine := func(p pendingPod) bool {
		if known[p.g.id] == 0 {
			known[p.g.id] = -1
			if p.g.selfAffine() {
				known[p.g.id] = 1
			}
		}
		return known[p.g.id] == 1
	}
	if !slices.ContainsFunc(order, selfAffine) {
		return order
	}
	out := make([]pendingPod, 0, len(order))
	for _, pending := range order {
		if selfAffine(pending) {
			out = append(out, pending)
		}
	}
	for _, pending := range order {
		if !selfAffine(pending) {
			out = append(out, pending)
		}
	}
	return out
}

// queueOrder is the order of Karpenter's scheduling queue: more CPU
// first, then more memory, then the older pod, then the smaller UID
// (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/provisioning/scheduling/queue.go
// byCPUAndMemoryDescending). Where NodePool limits leave too little
// capacity for every pod, it decides which pods get it: the largest,
// which are the hardest to place later, and among equals the oldest, as
// users moving from Karpenter expect.
func queueOrder(a, b pendingPod) int {
	return cmp.Or(-cmp.Compare(a.req[rCPU], b.req[rCPU]), -cmp.Compare(a.req[rMemory], b.req[rMemory]),
		a.pod.CreationTimestamp.Time.Compare(b.pod.CreationTimestamp.Time), cmp.Compare(a.pod.UID, b.pod.UID))
}

// arrange sorts pods biggest first by size, then spreads them so that
// every prefix has the pods' own mix (balance), or, with too many distinct
// requests for that, interleaves big and small around the mean size.
func arrange(order []pendingPod, size func(pendingPod) float64) []pendingPod {
	slices.SortStableFunc(order, func(a, b pendingPod) int {
		return cmp.Or(-cmp.Compare(size(a), size(b)), -cmp.Compare(a.req[rCPU], b.req[rCPU]), -cmp.Compare(a.req[rMemory], b.req[rMemory]),
			cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	if len(order) < 3 {
		return order
	}
	if out, ok := balance(order); ok {
		return out
	}
	sum := 0.0
	for _, pending := range order {
		sum += size(pending)
	}
	avg := sum / float64(len(order))
	out := make([]pendingPod, 0, len(order))
	front, back, taken := 0, len(order)-1, 0.0
	for front <= back {
		if taken <= avg*float64(len(out)) {
			out = append(out, order[front])
			taken += size(order[front])
			front++
		} else {
			out = append(out, order[back])
			taken += size(order[back])
			back--
		}
	}
	return out
}

// mixGain is how much cheaper the LP's two-type optimum must be than the
// cheapest single type for divide to split the pods: below it, one type
// packed with the whole workload's mix costs about as much and the split
// only adds a second shape to the fleet.
const mixGain = 0.01

// divide splits the pending pods between the two types of the LP's
// optimum when the mix is worth it (mixGain); nil otherwise. A side whose
// pods have its type's memory:CPU ratio fills its nodes on both
// resources, and when both sides have their type's ratio their sums are
// the LP's own split (the two rays decompose the total one way only). So
// pods go, biggest first, to the side that leaves the two sides' ratios
// least off their types'; the small pods at the end even out what the big
// ones left. Each pod remembers its side's type as the one to open a
// claim with (pendingPod.prefer).
func (s *solver) divide(pl *pool, basis [2]lpUse, total resVec) [][]pendingPod {
	use, b := basis[0], basis[1]
	if use.t == nil || b.t == nil || use.x < 1 || b.x < 1 || total[rCPU] <= 0 || total[rMemory] <= 0 {
		return nil
	}
	sides := divideSides{s.newDivideSide(use), s.newDivideSide(b)}
	C, M := float64(total[rCPU]), float64(total[rMemory])
	mixed := use.x*sides[0].price + b.x*sides[1].price
	if mixed > s.singleTypeCost(pl, C, M)*(1-mixGain) {
		return nil
	}
	order := arrange(slices.Clone(s.order), func(p pendingPod) float64 { return float64(p.req[rCPU])/C + float64(p.req[rMemory])/M })
	for _, pending := range order {
		sides.take(pending, M)
	}
	s.preferPool = pl
	return [][]pendingPod{sides[0].pods, sides[1].pods}
}

// divideSide is one of divide's two types and the pods it takes.
type divideSide struct {
	t            *ptype
	price        float64
	cpu, mem     float64 // usable room of one node
	usedC, usedM float64
	pods         []pendingPod
}

func (s *solver) newDivideSide(u lpUse) *divideSide {
	price, _ := u.t.cheapest(^uint64(0))
	cpu, mem := usable(u.t, s.slack)
	return &divideSide{t: u.t, price: price, cpu: cpu, mem: mem}
}

// off is how far the side's memory would be from its type's ratio times
// its CPU with c CPU and m memory, in shares of the total memory M.
func (sd *divideSide) off(c, m, M float64) float64 { return math.Abs(c*sd.mem/sd.cpu-m) / M }

// singleTypeCost is the cheapest cost of C CPU and M memory on nodes of
// one of the pool's LP types.
func (s *solver) singleTypeCost(pl *pool, C, M float64) float64 {
	single := math.Inf(1)
	for _, instType := range s.lpTypes(pl) {
		if price, ok := instType.cheapest(^uint64(0)); ok && price > 0 {
			if cpu, mem := usable(instType, s.slack); cpu > 0 && mem > 0 {
				single = min(single, price*max(C/cpu, M/mem))
			}
		}
	}
	return single
}

type divideSides [2]*divideSide

// take gives pending to the side that leaves the two sides' ratios least
// off their types'.
func (sides divideSides) take(pending pendingPod, M float64) {
	cpu, mem := float64(pending.req[rCPU]), float64(pending.req[rMemory])
	best, bestOff := 0, math.Inf(1)
	for i, sd := range sides {
		other := sides[1-i]
		dist := sd.off(sd.usedC+cpu, sd.usedM+mem, M) + other.off(other.usedC, other.usedM, M)
		if dist < bestOff-1e-12 {
			best, bestOff = i, dist
		}
	}
	sd := sides[best]
	sd.usedC, sd.usedM = sd.usedC+cpu, sd.usedM+mem
	pending.prefer = sd.t
	sd.pods = append(sd.pods, pending)
}

// maxBalanceClasses bounds the work of balance: pods × classes.
const maxBalanceClasses = 128

// balance reorders the (sorted) pods so that after every prefix the share
// of the total CPU, of the total memory and of the pod count taken so far
// are as equal as the pods' sizes allow. First fit then gives every claim
// the workload's own CPU:memory:pods mix, so no claim fills up on one
// resource with the others left over. Pods with the same requests form a
// class and keep their sorted order; ties go to the bigger class. It
// returns false, leaving the order alone, when there are too many classes
// to do this cheaply.
func balance(order []pendingPod) ([]pendingPod, bool) {
	type class struct {
		cpu, mem float64
		pods     []pendingPod
		next     int
	}
	var classes []*class
	index := map[[2]int64]int{}
	var totalCPU, totalMem float64
	for _, pending := range order {
		totalCPU, totalMem = totalCPU+float64(pending.req[rCPU]), totalMem+float64(pending.req[rMemory])
		key := [2]int64{pending.req[rCPU], pending.req[rMemory]}
		i, ok := index[key]
		if !ok {
			if len(classes) == maxBalanceClasses {
				return order, false
			}
			i = len(classes)
			index[key] = i
			classes = append(classes, &class{cpu: float64(pending.req[rCPU]), mem: float64(pending.req[rMemory])})
		}
		classes[i].pods = append(classes[i].pods, pending)
	}
	cpuW, memW := 0.0, 0.0
	if totalCPU > 0 {
		cpuW = 1 / totalCPU
	}
	if totalMem > 0 {
		memW = 1 / totalMem
	}
	count := float64(len(order))
	out := make([]pendingPod, 0, len(order))
	var cpu, mem float64
	for idx := range order {
		share := float64(idx+1) / count
		var best *class
		bestD := math.Inf(1)
		for _, cand := range classes {
			if cand.next == len(cand.pods) {
				continue
			}
			dist := math.Abs((cpu+cand.cpu)*cpuW-share) + math.Abs((mem+cand.mem)*memW-share)
			if dist < bestD-1e-12 {
				best, bestD = cand, dist
			}
		}
		out = append(out, best.pods[best.next])
		best.next++
		cpu += best.cpu
		mem += best.mem
	}
	return out, true
}

// internCounters creates the counters of every topology rule of pod.
func (s *solver) internCounters(pod *corev1.Pod, ns string) {
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		_, _ = s.counters.spreadCounter(pod, ns, tsc)
	}
	reqAff, prefAff := podAffinity(pod)
	reqAnti, prefAnti := podAntiAffinity(pod)
	for _, terms := range [][]corev1.PodAffinityTerm{reqAff, prefAff, reqAnti, prefAnti} {
		for _, term := range terms {
			_, _ = s.counters.forTerm(term, ns, false)
		}
	}
}

// newExisting makes bins of Nodes and in-flight NodeClaims, and counts the
// pods bound to them.
func (s *solver) newExisting(in Input, bound map[string]*boundOnNode) {
	poolIdx := map[string]int{}
	for i, pl := range s.pools {
		poolIdx[pl.np.Name] = i
	}
	nodes, nodesByProviderID := indexNodes(in.Nodes)
	claimOfNode, inFlight := matchClaims(in.NodeClaims, nodes, nodesByProviderID)
	s.reserveHostnameCounts(len(s.bins) + len(nodes) + len(inFlight))
	for _, node := range sortedByName(nodes) {
		if node.Spec.Unschedulable || node.DeletionTimestamp != nil {
			s.unseenNodes = true
			continue
		}
		s.addNodeBin(node, claimOfNode[node.Name], bound[node.Name])
	}
	for _, nc := range sortedBy(inFlight, func(nc *karpv1.NodeClaim) string { return nc.Name }) {
		var pl *pool
		if i, ok := poolIdx[nc.Labels[karpv1.NodePoolLabelKey]]; ok {
			pl = s.pools[i]
		}
		s.addInFlightBin(in, nc, pl, bound[nc.Status.NodeName])
	}
}

// reserveHostnameCounts gives every hostname counter room to count in
// bins bins (a hostname counter counts per bin id), so counting the bound
// pods of thousands of nodes does not regrow them.
func (s *solver) reserveHostnameCounts(bins int) {
	for _, counter := range s.counters.all {
		if counter.kind == keyHostname {
			counter.counts = slices.Grow(counter.counts, max(bins-len(counter.counts), 0))
		}
	}
}

// sortedByName lists the nodes ordered by name.
func sortedByName(byName map[string]*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(byName))
	for _, node := range byName {
		out = append(out, node)
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// indexNodes returns the nodes by name and by provider ID.
func indexNodes(list []*corev1.Node) (byName, byProviderID map[string]*corev1.Node) {
	byName = make(map[string]*corev1.Node, len(list))
	byProviderID = make(map[string]*corev1.Node, len(list))
	for _, node := range list {
		if node == nil {
			continue
		}
		byName[node.Name] = node
		if node.Spec.ProviderID != "" {
			byProviderID[node.Spec.ProviderID] = node
		}
	}
	return byName, byProviderID
}

// matchClaims returns the NodeClaims whose node exists, by node name, and
// the in-flight ones (no node yet and not being deleted).
func matchClaims(claims []*karpv1.NodeClaim, nodes, nodesByProviderID map[string]*corev1.Node) (map[string]*karpv1.NodeClaim, []*karpv1.NodeClaim) {
	claimOfNode := make(map[string]*karpv1.NodeClaim, len(claims))
	var inFlight []*karpv1.NodeClaim
	for _, nc := range claims {
		if nc == nil {
			continue
		}
		node := nodes[nc.Status.NodeName]
		if node == nil && nc.Status.ProviderID != "" {
			node = nodesByProviderID[nc.Status.ProviderID]
		}
		if node != nil {
			claimOfNode[node.Name] = nc
		} else if nc.DeletionTimestamp == nil {
			inFlight = append(inFlight, nc)
		}
	}
	return claimOfNode, inFlight
}

// addNodeBin adds a bin for a schedulable node (claim is its NodeClaim,
// if any) and counts the pods bound to it.
func (s *solver) addNodeBin(n *corev1.Node, claim *karpv1.NodeClaim, onNode *boundOnNode) {
	target := &bin{id: len(s.bins), node: n.Name, labels: labels.Set(n.Labels), nodeObject: n}
	var startup []corev1.Taint
	if claim != nil {
		target.claimName = claim.Name
		startup = claim.Spec.StartupTaints
	}
	target.taints = lastingTaints(n.Spec.Taints, startup)
	if zone, ok := n.Labels[corev1.LabelTopologyZone]; ok {
		if i := s.dom.zone(zone); i >= 0 {
			target.zones = 1 << i
		}
	}
	if ct, ok := n.Labels[karpv1.CapacityTypeLabelKey]; ok {
		target.cts = 1 << ctIndex(ct)
	}
	allocatable := nodeAllocatable(n, claim)
	target.maxRoom = s.roomLeft(allocatable, onNode)
	target.alloc = s.roomLeft(allocatable, nil)
	target.used = make(resVec, len(s.res.names))
	s.addBin(target)
	if onNode != nil {
		target.ports = slices.Clone(onNode.ports) // the bin appends its own
		for _, counter := range onNode.counted {
			s.count(target, counter)
		}
	}
}

// nodeAllocatable is what a node offers pods: its reported allocatable,
// except that a node of a NodeClaim that is not initialized yet counts each
// resource it reports as zero (or not at all) at the NodeClaim's value, as
// Karpenter's StateNode.Allocatable does
// (controllers/state/statenode.go:377-392): a GPU node whose device plugin
// has not registered its GPUs still holds the GPU pods nominated to it, so
// they do not launch another node.
func nodeAllocatable(n *corev1.Node, claim *karpv1.NodeClaim) corev1.ResourceList {
	if claim == nil || n.Labels[karpv1.NodeInitializedLabelKey] == "true" || len(claim.Status.Allocatable) == 0 {
		return n.Status.Allocatable
	}
	out := n.Status.Allocatable.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, quantity := range claim.Status.Allocatable {
		if have, ok := out[name]; !ok || have.IsZero() {
			out[name] = quantity
		}
	}
	return out
}

// lastingTaints returns the node's taints less those that go away once a
// node is up (known ephemeral taints and the claim's startup taints): they
// do not keep pods off it.
func lastingTaints(taints, startup []corev1.Taint) []corev1.Taint {
	var lasting []corev1.Taint
	for _, taint := range taints {
		if !scheduling.IsKnownEphemeralTaint(&taint) && !slices.ContainsFunc(startup, func(st corev1.Taint) bool { return st.MatchTaint(&taint) }) {
			lasting = append(lasting, taint)
		}
	}
	return lasting
}

// addInFlightBin adds a bin for a NodeClaim without a node yet (pl is its
// pool, if known), unless its capacity is unknown.
func (s *solver) addInFlightBin(in Input, nc *karpv1.NodeClaim, pl *pool, onNode *boundOnNode) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	reqs.Add(scheduling.NewLabelRequirements(nc.Labels).Values()...)
	available := inFlightAllocatable(nc, reqs, pl, in.CatalogFor(nc.Labels[karpv1.NodePoolLabelKey]))
	if available == nil {
		s.unseenNodes = true
		return // neither launched nor naming a known instance type: no capacity to count on
	}
	target := &bin{id: len(s.bins), claimName: nc.Name, labels: labels.Set(nc.Labels), reqs: reqs, inFlight: true, taints: nc.Spec.Taints}
	zoneReq := reqs.Get(corev1.LabelTopologyZone)
	for i, zone := range s.dom.zones {
		if zoneReq.Has(zone) {
			target.zones |= 1 << i
		}
	}
	capacityTypeReq := reqs.Get(karpv1.CapacityTypeLabelKey)
	for i, ct := range capacityTypes {
		if capacityTypeReq.Has(ct) {
			target.cts |= 1 << i
		}
	}
	target.maxRoom = s.roomLeft(available, onNode)
	target.alloc = s.roomLeft(available, nil)
	target.used = make(resVec, len(s.res.names))
	if onNode != nil {
		target.ports = slices.Clone(onNode.ports) // the bin appends its own
	}
	s.addBin(target)
}

func (s *solver) addBin(b *bin) {
	b.id = len(s.bins)
	s.bins = append(s.bins, b)
	s.active = append(s.active, b)
	s.index.set(b)
}

// inFlightAllocatable is a launched claim's reported allocatable, else the
// smallest of the instance types its requirements allow (component-wise, so
// whichever one launches has at least that much), less daemonsets.
func inFlightAllocatable(nc *karpv1.NodeClaim, reqs scheduling.Requirements, pl *pool, c *catalog.Catalog) corev1.ResourceList {
	var daemon corev1.ResourceList
	if pl != nil {
		var ds []corev1.ResourceList
		for _, instType := range pl.types {
			ds = append(ds, instType.daemon)
		}
		daemon = resources.MaxResources(ds...)
	}
	if len(nc.Status.Allocatable) > 0 {
		return resources.Subtract(nc.Status.Allocatable, daemon)
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
	return resources.Subtract(resources.MinResources(allocs...), daemon)
}

func sortedBy[T any](in []T, key func(T) string) []T {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// place puts the current pod of g somewhere, relaxing preferences in
// Karpenter's order until it fits.
//
// Every pod starts from the top (all preferences), as in Karpenter, even
// when an identical pod before it had to relax: what the solver has placed
// since can make a preference satisfiable again (a pod matching a preferred
// affinity lands, a spread's minimum domain fills, another group opens a
// claim the pod can share), and starting where the previous pod ended would
// then place the pod worse than Karpenter. The variants of every level are
// built once per group, so retrying costs only the placement attempts.
func (s *solver) place(g *group) bool {
	for lvl := 0; ; lvl++ {
		variant := s.variantAt(g, lvl)
		if variant == nil {
			return false
		}
		if variant.err != "" || g.volumeErr != "" {
			continue
		}
		if g.pending > 1 && firstOfHostGroup(variant) {
			// The first of replicas that must share a node goes, if it
			// can, where all of them fit: elsewhere the others find no
			// room next to it.
			s.wholeGroup = true
			placed := s.placeVariant(variant)
			s.wholeGroup = false
			if placed {
				return true
			}
		}
		if s.placeVariant(variant) {
			return true
		}
	}
}

// firstOfHostGroup reports whether v's pods have required pod affinity
// on kubernetes.io/hostname to their own kind and none is placed yet.
func firstOfHostGroup(v *variant) bool {
	return slices.ContainsFunc(v.constraints, func(k *constraint) bool {
		return k.kind == affinity && k.c.kind == keyHostname && k.self == 1 && k.c.total == 0
	})
}

func (s *solver) placeVariant(v *variant) bool {
	if s.spread {
		return s.spreadVariant(v)
	}
	if s.placeOpen(v) {
		return true
	}
	if !s.hostMin {
		for i, pl := range s.pools {
			if bin := s.open(pl, i, v); bin != nil {
				s.addBin(bin)
				s.maybeClose(bin)
				return true
			}
		}
	}
	return s.growOpen(v)
}

// growOpen puts one pod of v on the first open claim that holds it in
// any of its options, past the target it packs to: when no new claim can
// be opened (limits reached, say), a claim grows into the larger options
// the pool's limits were already charged for, as Karpenter adds a pod to
// an in-flight NodeClaim while any of its instance types still fits.
func (s *solver) growOpen(v *variant) bool {
	if s.packLargest {
		return false // claims already take pods while any option holds them
	}
	s.pastTarget = true
	defer func() { s.pastTarget = false }()
	return s.placeOpen(v)
}

// placeOpen puts one pod of v on the first open bin that takes it, in bin
// order (first fit).
func (s *solver) placeOpen(v *variant) bool {
	if s.byQueue {
		return s.placeFewestFirst(v)
	}
	if s.linearScan {
		for _, bin := range s.active {
			if bin.closed {
				continue
			}
			if ok, _ := s.try(bin, v, true); ok {
				s.maybeClose(bin)
				return true
			}
		}
		return false
	}
	for id := s.index.next(0, v.g.req); id >= 0; id = s.index.next(id+1, v.g.req) {
		bin := s.bins[id]
		if ok, _ := s.try(bin, v, true); ok {
			s.maybeClose(bin)
			return true
		}
	}
	return false
}

// placeFewestFirst puts one pod of v where Karpenter's scheduler would:
// the first existing node or in-flight claim that takes it, else the new
// claim with the fewest pods (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/provisioning/scheduling/scheduler.go add: newNodeClaims
// sorted by pod count before addToInflightNode). Used with Karpenter's
// queue order, where NodePool limits leave pods pending: which pods get
// the capacity then depends on where the pods before them went, and a
// pod spread over the least filled claims leaves room next to its
// neighbours for the pods with affinity to them.
func (s *solver) placeFewestFirst(v *variant) bool {
	var claims []*bin
	for _, b := range s.active {
		if b.closed {
			continue
		}
		if b.claim {
			claims = append(claims, b)
			continue
		}
		if ok, _ := s.try(b, v, true); ok {
			s.maybeClose(b)
			return true
		}
	}
	slices.SortStableFunc(claims, func(a, b *bin) int { return cmp.Compare(len(a.pods), len(b.pods)) })
	for _, b := range claims {
		if ok, _ := s.try(b, v, true); ok {
			s.maybeClose(b)
			return true
		}
	}
	return false
}

// maybeClose retires a bin that cannot take even the smallest pending pod.
func (s *solver) maybeClose(b *bin) {
	if fitsSum(b.used, s.minReq, b.maxRoom) {
		return
	}
	b.closed = true
	s.index.set(b)
	s.closed++
	if s.closed > 64 && s.closed > len(s.active)/2 {
		s.active = slices.DeleteFunc(s.active, func(b *bin) bool { return b.closed })
		s.closed = 0
	}
}

// open starts a new claim in pool i for one pod of v, or returns nil.
func (s *solver) open(pl *pool, i int, v *variant) *bin {
	vp := s.variantPool(v, i)
	if !vp.ok || !v.toleratesPool(pl, i) || !v.g.req.fitsIn(vp.maxRoom) {
		return nil
	}
	var opts []*ptype
	maxRoom := make(resVec, len(s.res.names))
	for _, instType := range s.byEfficiency(pl) {
		if vp.types.has(instType.idx) && v.g.req.fitsIn(instType.room) && withinLimits(pl, instType) {
			opts = append(opts, instType)
			maxRoom.maxInPlace(instType.room)
		}
	}
	if len(opts) == 0 {
		return nil
	}
	if s.packLargest {
		// Largest first: the claim's target is the roomiest type, and
		// fits looks past it (see fits).
		slices.SortStableFunc(opts, func(a, b *ptype) int {
			return cmp.Or(-cmp.Compare(a.room[rCPU], b.room[rCPU]), -cmp.Compare(a.room[rMemory], b.room[rMemory]))
		})
	} else if pl == s.preferPool && s.prefer != nil {
		// The claim packs to its first option: make it the pod's side of
		// the LP's mix (see divide) or of the small type (see tooBigFirst).
		if idx := slices.Index(opts, s.prefer); idx > 0 {
			copy(opts[1:idx+1], opts[:idx])
			opts[0] = s.prefer
		}
	}
	opts, types, cts, charge, refused := s.pinQuota(pl, opts, vp)
	target := &bin{claim: true, id: len(s.bins), pool: pl, poolIdx: i, types: types, zones: vp.zones, cts: cts,
		custom: vp.custom, customKeys: map[string]bool{}, absorbed: map[*poolVariant]bool{},
		opts: opts, maxRoom: maxRoom, used: make(resVec, len(s.res.names)), quota: charge}
	ok, failed := s.try(target, v, true)
	if !ok {
		s.lastWhy[i] = refused
		if failed != nil {
			s.lastWhy[i] = failed.desc + " leaves no domain for the pod on a new node"
		}
		return nil
	}
	return target
}

// byEfficiency is the pool's types, most cost-efficient first: value is
// room priced at the dual prices of the LP that covers all pending pods'
// CPU and memory with this pool's types, over the type's cheapest price.
// A type the LP would buy scores 1; claims pack to the best one that fits.
func (s *solver) byEfficiency(pl *pool) []*ptype {
	if pl.byEfficiency != nil {
		return pl.byEfficiency
	}
	total := make(resVec, len(s.res.names))
	for _, pending := range s.order {
		total.addInPlace(pending.req)
	}
	yCPU, yMem, basis := lpSolve(s.lpTypes(pl), float64(total[rCPU]), float64(total[rMemory]), s.slack)
	nodes := func(t *ptype) float64 {
		for _, use := range basis {
			if use.t == t {
				return use.x
			}
		}
		return 0
	}
	eff := make(map[*ptype]float64, len(pl.types))
	for _, instType := range pl.types {
		if price, ok := instType.cheapest(^uint64(0)); ok && price > 0 {
			cpu, mem := usable(instType, s.slack)
			eff[instType] = (yCPU*cpu + yMem*mem) / price
		}
	}
	pl.byEfficiency = slices.Clone(pl.types)
	slices.SortStableFunc(pl.byEfficiency, func(a, b *ptype) int {
		if math.Abs(eff[a]-eff[b]) > effTie {
			return cmp.Compare(eff[b], eff[a])
		}
		// Both types of the LP's optimum score 1: the one it buys more
		// nodes of first, as a fraction of a node of the other only
		// evens out the mix. Other ties keep the largest-first order.
		return cmp.Compare(nodes(b), nodes(a))
	})
	return pl.byEfficiency
}

// effTie is how close two efficiencies are to count as equal: both types
// of the LP's optimum score 1 up to rounding.
const effTie = 1e-9

// lpTypes are the pool's types the LP prices resources with: those that
// hold the largest pending pod (CPU and memory, separately), or all if none
// does. A type too small for much of the workload (a 2-vCPU burstable, say)
// can make the fractional cover look cheap in a way no packing reaches,
// and its dual prices would then rank the usable types wrongly. So can a
// type too large for it: when the LP over all pending pods buys less than
// one node of a type (a fraction of a 400-vCPU, 7-TiB machine, say), that
// type is left out and the LP solved again, as no fleet can buy a fraction
// of a node.
func (s *solver) lpTypes(pl *pool) []*ptype {
	if pl.lpTypes != nil {
		return pl.lpTypes
	}
	var big [2]int64
	total := make(resVec, len(s.res.names))
	for _, pending := range s.order {
		total.addInPlace(pending.req)
	}
	for _, group := range s.groups {
		big[0], big[1] = max(big[0], group.req[rCPU]), max(big[1], group.req[rMemory])
	}
	for _, instType := range pl.types {
		if instType.room[rCPU] >= big[0] && instType.room[rMemory] >= big[1] {
			pl.lpTypes = append(pl.lpTypes, instType)
		}
	}
	if len(pl.lpTypes) == 0 {
		pl.lpTypes = pl.types
	}
	for range len(pl.lpTypes) {
		_, _, basis := lpSolve(pl.lpTypes, float64(total[rCPU]), float64(total[rMemory]), s.slack)
		var partial []*ptype
		for _, use := range basis {
			if use.t != nil && use.x < 1 && !absorbed(use, basis, s.slack) {
				partial = append(partial, use.t)
			}
		}
		if len(partial) == 0 || len(partial) == len(pl.lpTypes) {
			break
		}
		pl.lpTypes = slices.DeleteFunc(slices.Clone(pl.lpTypes), func(t *ptype) bool { return slices.Contains(partial, t) })
	}
	return pl.lpTypes
}

// absorbed reports whether the fraction of a node the LP's optimum buys
// of part fits in the room the fleet has anyway on the whole nodes of the
// basis's other type: their count rounds up, and the last node's unused
// share holds part's CPU and memory. The LP then only evens out the mix
// (a memory-richer type for the last few GiB the cheapest-per-vCPU type
// lacks), a real fleet reaches its optimum, and part stays in the LP:
// leaving it out would make the LP pair the main type with another
// partner, then another, until none is left and the duals price one
// resource only.
func absorbed(part lpUse, basis [2]lpUse, slack [2]float64) bool {
	for _, whole := range basis {
		if whole.t == nil || whole.t == part.t || whole.x < 1 {
			continue
		}
		spare := math.Ceil(whole.x) - whole.x
		wholeCPU, wholeMem := usable(whole.t, slack)
		partCPU, partMem := usable(part.t, slack)
		return part.x*partCPU <= spare*wholeCPU && part.x*partMem <= spare*wholeMem
	}
	return false
}

// lpDuals solves min Σ price·x s.t. Σ usable_cpu·x ≥ cpu, Σ usable_mem·x ≥
// mem (an optimum uses one type or two), usable being each type's room
// less slack, and returns the dual prices of CPU and memory at the
// optimum.
func lpDuals(types []*ptype, cpu, mem float64, slack [2]float64) (yCPU, yMem float64) {
	yCPU, yMem, _ = lpSolve(types, cpu, mem, slack)
	return yCPU, yMem
}

// usable is the CPU and memory of t's room that packing can expect to
// fill: the room less slack, the mean pending pod (first fit leaves about
// one pod's worth unused per node, which matters on small types only).
func usable(t *ptype, slack [2]float64) (cpu, mem float64) {
	return max(float64(t.room[rCPU])-slack[0], 0), max(float64(t.room[rMemory])-slack[1], 0)
}

// lpUse is a type in the LP's optimum and how many nodes of it (x) the
// optimum buys.
type lpUse struct {
	t *ptype
	x float64
}

// lpSolve is lpDuals with the optimum's basis (one or two types), solved by
// coverlp over the types with a price and usable room.
func lpSolve(types []*ptype, cpu, mem float64, slack [2]float64) (yCPU, yMem float64, basis [2]lpUse) {
	cols := make([]coverlp.Type, 0, len(types))
	colTypes := make([]*ptype, 0, len(types))
	for _, instType := range types {
		cpu, mem := usable(instType, slack)
		if price, ok := instType.cheapest(^uint64(0)); ok && price > 0 && cpu > 0 && mem > 0 {
			cols = append(cols, coverlp.Type{CPU: cpu, Mem: mem, Price: price})
			colTypes = append(colTypes, instType)
		}
	}
	sol := coverlp.Solve(cols, cpu, mem)
	for idx, u := range sol.Basis {
		if u.Index >= 0 {
			basis[idx] = lpUse{colTypes[u.Index], u.Nodes}
		}
	}
	return sol.DualCPU, sol.DualMem, basis
}

func withinLimits(pl *pool, t *ptype) bool {
	for j, amount := range t.limitCap {
		if amount > pl.limitLeft[j] {
			return false
		}
	}
	return true
}

// explain says why no pool could take the current pod of g, pool by pool.
func (s *solver) explain(g *group) string {
	if g.volumeErr != "" {
		return g.volumeErr
	}
	variant := g.variants[len(g.variants)-1]
	if variant.err != "" {
		return variant.err
	}
	if len(s.pools) == 0 {
		return "no NodePool exists; create a karpenter.sh/v1 NodePool whose AKSNodeClass exists"
	}
	var reasons []string
	allTaints := true
	for i, pl := range s.pools {
		reason, taint := s.explainPool(pl, i, variant)
		allTaints = allTaints && taint
		reasons = append(reasons, reason)
	}
	if allTaints {
		return "no NodePool tolerated: " + strings.Join(reasons, "; ")
	}
	return strings.Join(reasons, "; ")
}

func (s *solver) explainPool(pl *pool, i int, v *variant) (reason string, taint bool) {
	if pl.invalid != "" {
		return pl.invalid, false
	}
	if !v.toleratesPool(pl, i) {
		return fmt.Sprintf("NodePool %s: %v", pl.np.Name, pl.taints.Tolerates(v.tolerations)), true
	}
	vp := s.variantPool(v, i)
	if !vp.ok {
		return vp.why, false
	}
	if reason, over := overLimitsReason(pl, vp, v.g); over {
		return reason, false
	}
	allowed := allowedTypes(pl, vp)
	if len(allowed) == 0 {
		return noTypeReason(pl, vp), false
	}
	fitting := slices.DeleteFunc(slices.Clone(allowed), func(t *ptype) bool { return !v.g.req.fitsIn(t.room) })
	if len(fitting) == 0 {
		return s.tooBig(pl, v.g, allowed), false
	}
	if s.lastWhy[i] != "" {
		return fmt.Sprintf("NodePool %s: %s", pl.np.Name, s.lastWhy[i]), false
	}
	if pl.minValues != nil && !satisfiesMinValues(fitting, pl.minValues) {
		return fmt.Sprintf("NodePool %s: fewer instance types fit the pod than the requirements' minValues ask for", pl.np.Name), false
	}
	return fmt.Sprintf("NodePool %s: no instance type fits the pod", pl.np.Name), false
}

// overLimitsReason reports whether some allowed type fits the group but
// none within the pool's limits, and then why. Counting comes first: this
// runs for every pod that does not fit, and the slices are needed only for
// the rarer reasons.
func overLimitsReason(pl *pool, vp *poolVariant, g *group) (string, bool) {
	fittingCount, inLimits := 0, false
	for _, instType := range pl.types {
		if vp.types.has(instType.idx) && g.req.fitsIn(instType.room) {
			fittingCount++
			inLimits = inLimits || withinLimits(pl, instType)
		}
	}
	if fittingCount == 0 || inLimits {
		return "", false
	}
	if pl.overLimits == "" {
		pl.overLimits = fmt.Sprintf("NodePool %s: launching another node would exceed its limits (%s)", pl.np.Name, resources.String(pl.limits))
	}
	return pl.overLimits, true
}

// allowedTypes returns the pool's types the variant allows.
func allowedTypes(pl *pool, vp *poolVariant) []*ptype {
	allowedCount := 0
	for _, instType := range pl.types {
		if vp.types.has(instType.idx) {
			allowedCount++
		}
	}
	allowed := make([]*ptype, 0, allowedCount)
	for _, instType := range pl.types {
		if vp.types.has(instType.idx) {
			allowed = append(allowed, instType)
		}
	}
	return allowed
}

// noTypeReason says why no type of the pool is allowed: the matching ones
// have no image, or none matches at all.
func noTypeReason(pl *pool, vp *poolVariant) string {
	var noImage []noImageType
	for _, unlaunchable := range pl.noImage {
		if unlaunchable.reqs.Intersects(vp.reqs) == nil {
			noImage = append(noImage, unlaunchable)
		}
	}
	if len(noImage) > 0 {
		return noImageReason(pl, noImage)
	}
	return fmt.Sprintf("NodePool %s: no instance type in the catalog matches both the NodePool's and the pod's requirements (%s)", pl.np.Name, vp.reqs)
}

// tooBig names the first requested resource no allowed type has enough of.
func (s *solver) tooBig(pl *pool, g *group, allowed []*ptype) string {
	for i, name := range s.res.names {
		want := g.req[i]
		var best *ptype
		for _, instType := range allowed {
			if best == nil || instType.room[i] > best.room[i] {
				best = instType
			}
		}
		if want <= best.room[i] {
			continue
		}
		if name == corev1.ResourcePods {
			return fmt.Sprintf("NodePool %s: its nodes take at most %d pods (AKSNodeClass maxPods) after daemonsets", pl.np.Name, best.room[i])
		}
		capacity := best.it.Capacity[name]
		return fmt.Sprintf("requests %s; the largest allowed SKU in NodePool %s (%s) has %s, %s after AKS reservations and daemonsets",
			describe(name, quantity(name, want)), pl.np.Name, best.it.Name, describe(name, capacity), describe(name, quantity(name, best.room[i]))) +
			gpuExcludedHint(pl, name)
	}
	return fmt.Sprintf("requests %s together; no allowed SKU in NodePool %s has all of it after AKS reservations and daemonsets",
		resources.String(s.res.list(g.req)), pl.np.Name)
}

func quantity(name corev1.ResourceName, v int64) resource.Quantity {
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

func describe(name corev1.ResourceName, q resource.Quantity) string {
	if name == corev1.ResourceCPU {
		// Millicores as a person writes them: "31.58 vCPU", not a float's
		// binary expansion.
		return fmt.Sprintf("%g vCPU", float64(q.MilliValue())/1000)
	}
	if name == corev1.ResourceMemory {
		return fmt.Sprintf("%.1fGi memory", q.AsApproximateFloat64()/(1<<30))
	}
	return fmt.Sprintf("%s %s", q.String(), name)
}

// plan turns a packed claim into its NodeClaimPlan.
func (s *solver) plan(b *bin) *NodeClaimPlan {
	pl := b.pool
	reqs := copyRequirements(pl.reqs)
	for _, vp := range sortedVariants(b.absorbed) {
		reqs.Add(vp.reqs.Values()...)
	}
	reqs.Add(b.custom.Values()...)
	var zones []string
	for i, zone := range s.dom.zones {
		if b.zones&(1<<i) != 0 && zone != "" {
			zones = append(zones, zone)
		}
	}
	if len(zones) > 0 {
		reqs.Add(scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...))
	}
	var cts []string
	for i, ct := range capacityTypes {
		if b.cts&(1<<i) != 0 {
			cts = append(cts, ct)
		}
	}
	reqs.Add(scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, cts...))
	// Options cheapest first (at their cheapest allowed offering), then by name.
	offers := offerMask(b.zones, b.cts)
	type option struct {
		t     *ptype
		price float64
	}
	opts := make([]option, 0, len(b.opts))
	for _, instType := range b.opts {
		if price, ok := instType.cheapest(offers); ok {
			opts = append(opts, option{instType, price})
		}
	}
	slices.SortFunc(opts, func(a, b option) int {
		return cmp.Or(cmp.Compare(a.price, b.price), cmp.Compare(a.t.it.Name, b.t.it.Name))
	})
	types := make([]*catalog.InstanceType, len(opts))
	names := make([]string, len(opts))
	for i, opt := range opts {
		types[i], names[i] = opt.t.it, opt.t.it.Name
	}
	reqs.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
	var daemon corev1.ResourceList
	if len(opts) > 0 {
		daemon = opts[0].t.daemon
	}
	pods := slices.Clone(b.pods)
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return &NodeClaimPlan{
		NodePool:      pl.np,
		NodeClass:     pl.class,
		Pods:          pods,
		Requirements:  reqs,
		InstanceTypes: types,
		Requests:      resources.Merge(s.res.list(b.used), daemon),
	}
}

func sortedVariants(m map[*poolVariant]bool) []*poolVariant {
	out := make([]*poolVariant, 0, len(m))
	for vp := range m {
		out = append(out, vp)
	}
	slices.SortFunc(out, func(a, b *poolVariant) int { return cmp.Compare(requirementsKey(a.reqs), requirementsKey(b.reqs)) })
	return out
}
