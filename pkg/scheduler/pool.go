package scheduler

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/gpu"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

var allowWellKnown = scheduling.AllowUndefinedWellKnownLabels

// resourceNodes is the NodePool limit on the number of nodes.
const resourceNodes corev1.ResourceName = "nodes"

// pool is a NodePool ready for packing.
type pool struct {
	np      *karpv1.NodePool
	class   *v1beta1.AKSNodeClass
	maxPods int32
	// invalid says why the pool can take no pod at all (e.g. missing class).
	invalid string
	// noImage are the instance types the pool's requirements allow but
	// the AKSNodeClass's image family has no node image for.
	noImage []noImageType
	// gpuExcluded are the GPU sizes the requirements allow but the
	// AKSNodeClass's image family or spec.gpu.mode rules out (package gpu).
	gpuExcluded []gpuExcludedType
	// invalidNodePool is true when invalid is about the NodePool's own
	// configuration, which Result.InvalidNodePools reports.
	invalidNodePool bool
	reqs            scheduling.Requirements
	taints          scheduling.Taints
	// types are the instance types the pool can launch, largest room first
	// so that a fit test usually succeeds on the first one.
	types []*ptype
	// byEfficiency are types, most cost-efficient for the pending pods first.
	byEfficiency []*ptype
	// lpTypes are the types the LP duals are computed over.
	lpTypes []*ptype
	// preferNoSchedule is true when a taint has that effect: pods may then
	// relax into tolerating it, as in Karpenter.
	preferNoSchedule bool
	// minValues are the requirement keys with a minimum number of values.
	minValues map[string]int

	// Limits, as vectors over limitNames: limitLeft is the limit minus what
	// existing NodeClaims hold minus what planned claims may grow to.
	limitNames []corev1.ResourceName
	limits     corev1.ResourceList
	held       corev1.ResourceList
	limitLeft  []int64
	overLimits string // explain's reason when no type fits the limits left; limits do not change

	variants map[string]*poolVariant
}

// ptype is an instance type as this pool would launch it.
type ptype struct {
	idx  int
	it   *catalog.InstanceType
	reqs scheduling.Requirements
	// room is allocatable minus the overhead of the daemonsets that would
	// run on this type: what pending pods can use.
	room   resVec
	daemon corev1.ResourceList
	// offers has bit zone*2+capacityType for every available offering.
	offers   uint64
	prices   []offerPrice
	limitCap []int64
}

// gpuExcludedType is a GPU size left out, and why.
type gpuExcludedType struct {
	it  *catalog.InstanceType
	err error
}

// gpuExcludedHint is, for a resource no allowed type has enough of, why
// the pool's GPU sizes that have it were left out ("" when none was).
func gpuExcludedHint(pl *pool, name corev1.ResourceName) string {
	for _, excluded := range pl.gpuExcluded {
		if q, ok := excluded.it.Capacity[name]; ok && !q.IsZero() {
			return fmt.Sprintf("; AKSNodeClass %s leaves out %s", pl.class.Name, excluded.err)
		}
	}
	return ""
}

// noImageType is an instance type left out because no node image boots it.
type noImageType struct {
	it   *catalog.InstanceType
	reqs scheduling.Requirements
	err  error
}

type offerPrice struct {
	bit   uint64
	price float64
}

// cheapest is the lowest price among offerings in mask.
func (t *ptype) cheapest(mask uint64) (float64, bool) {
	best, found := 0.0, false
	for _, offer := range t.prices {
		if offer.bit&mask != 0 && (!found || offer.price < best) {
			best, found = offer.price, true
		}
	}
	return best, found
}

// poolVariant is a pool narrowed by one set of pod requirements.
type poolVariant struct {
	ok  bool
	why string
	// reqs are the pool's requirements plus the pod's.
	reqs  scheduling.Requirements
	types bitset
	// zones and cts are masks of allowed zones and capacity types.
	zones, cts uint64
	offerMask  uint64
	// custom holds the requirements on keys instance types do not define
	// (NodePool labels, custom labels); nodes get these as labels.
	custom    scheduling.Requirements
	customKey string
	// maxRoom is the component-wise largest room among types.
	maxRoom resVec
	// offeredZones and offeredCTs are where its types are offered.
	offeredZones, offeredCTs uint64
}

func (s *solver) newPools(in Input) {
	classes := map[string]*v1beta1.AKSNodeClass{}
	for _, nodeClass := range in.NodeClasses {
		if nodeClass != nil {
			classes[nodeClass.Name] = nodeClass
		}
	}
	nps := slices.DeleteFunc(slices.Clone(in.NodePools), func(np *karpv1.NodePool) bool { return np == nil || np.DeletionTimestamp != nil })
	// Heaviest first, equal weights by name descending: the order of
	// Karpenter's utils/nodepool.OrderByWeight, so the same pod gets the
	// same NodePool as under Karpenter.
	slices.SortStableFunc(nps, func(a, b *karpv1.NodePool) int {
		return cmp.Or(-cmp.Compare(ptrOr(a.Spec.Weight, 0), ptrOr(b.Spec.Weight, 0)), -cmp.Compare(a.Name, b.Name))
	})
	for _, np := range nps {
		s.pools = append(s.pools, s.newPool(np, classes, in))
	}
}

func (s *solver) newPool(np *karpv1.NodePool, classes map[string]*v1beta1.AKSNodeClass, in Input) *pool {
	pl := &pool{np: np, maxPods: v1beta1.DefaultMaxPods, variants: map[string]*poolVariant{}}
	if in.DefaultMaxPods > 0 {
		pl.maxPods = in.DefaultMaxPods
	}
	if problem := nodeClassProblem(np, classes, in.NotReady); problem != "" {
		pl.invalid = problem
		return pl
	}
	pl.class = classes[np.Spec.Template.Spec.NodeClassRef.Name]
	pl.maxPods = *pl.class.DefaultedSpecFor(in.DefaultMaxPods).MaxPods
	if np.Spec.Replicas != nil {
		// As Karpenter's provisioner (pkg/controllers/provisioning/
		// provisioner.go:277), a static pool opens no NodeClaim for
		// pending pods; its nodes take pods as existing capacity.
		pl.invalid = fmt.Sprintf("NodePool %s is static (spec.replicas %d): it keeps that many nodes and opens none for pending pods", np.Name, *np.Spec.Replicas)
		return pl
	}
	if in.Catalog == nil {
		pl.invalid = "no instance-type catalog was given to the scheduler"
		return pl
	}
	pl.setRequirements()
	if len(np.Spec.Limits) > 0 {
		pl.setLimits(in)
	}
	s.addPoolTypes(pl, in)
	if len(pl.types) == 0 && len(pl.noImage) > 0 {
		pl.invalid = noImageReason(pl, pl.noImage)
		pl.invalidNodePool = true
	}
	slices.SortStableFunc(pl.types, func(a, b *ptype) int {
		return cmp.Or(-cmp.Compare(a.room[rCPU], b.room[rCPU]), -cmp.Compare(a.room[rMemory], b.room[rMemory]), cmp.Compare(a.it.Name, b.it.Name))
	})
	for i, instType := range pl.types {
		instType.idx = i
	}
	return pl
}

// nodeClassProblem says why the NodePool cannot launch: it is not ready,
// or its nodeClassRef is missing, of another kind, or names no
// AKSNodeClass; "" when none of these holds.
func nodeClassProblem(np *karpv1.NodePool, classes map[string]*v1beta1.AKSNodeClass, notReady map[string]string) string {
	ref := np.Spec.Template.Spec.NodeClassRef
	if why, ok := notReady[np.Name]; ok {
		return fmt.Sprintf("NodePool %s is not ready: %s", np.Name, why)
	}
	switch {
	case ref == nil:
		return fmt.Sprintf("NodePool %s has no nodeClassRef; point it at an AKSNodeClass (group karpenter.azure.com)", np.Name)
	case ref.Group != v1beta1.SchemeGroupVersion.Group || ref.Kind != "AKSNodeClass":
		return fmt.Sprintf("NodePool %s references %s %q in group %q; karpfunc launches only AKSNodeClass (group karpenter.azure.com)", np.Name, ref.Kind, ref.Name, ref.Group)
	case classes[ref.Name] == nil:
		return fmt.Sprintf("NodePool %s references AKSNodeClass %q which does not exist", np.Name, ref.Name)
	}
	return ""
}

// setRequirements sets the pool's requirements, minValues, taints and
// whether any taint is PreferNoSchedule.
func (pl *pool) setRequirements() {
	np := pl.np
	// As Karpenter's NodeClaimTemplate: template requirements, template
	// labels and the nodepool label.
	pl.reqs = scheduling.NewNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
	pl.reqs.Add(scheduling.NewLabelRequirements(np.Spec.Template.Labels).Values()...)
	pl.reqs.Add(scheduling.NewRequirement(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, np.Name))
	for _, req := range np.Spec.Template.Spec.Requirements {
		if req.MinValues != nil {
			if pl.minValues == nil {
				pl.minValues = map[string]int{}
			}
			pl.minValues[req.Key] = max(pl.minValues[req.Key], *req.MinValues)
		}
	}
	pl.taints = np.Spec.Template.Spec.Taints
	for _, taint := range pl.taints {
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			pl.preferNoSchedule = true
		}
	}
}

// setLimits sets the pool's limits and what is left of each after the
// capacity its NodeClaims (live and held) are charged.
func (pl *pool) setLimits(in Input) {
	np := pl.np
	pl.limits = corev1.ResourceList(np.Spec.Limits).DeepCopy()
	var held []corev1.ResourceList
	nodes := int64(0)
	for _, nc := range slices.Concat(in.NodeClaims, in.HeldNodeClaims) {
		if nc != nil && nc.Labels[karpv1.NodePoolLabelKey] == np.Name {
			held = append(held, ChargedCapacity(nc, in.CatalogFor(np.Name), pl.maxPods))
			nodes++
		}
	}
	pl.held = resources.Merge(held...)
	for name, limit := range pl.limits {
		pl.limitNames = append(pl.limitNames, name)
		left := quantityValue(name, limit)
		if name == resourceNodes {
			left -= nodes
		} else if quantity, ok := pl.held[name]; ok {
			left -= quantityValue(name, quantity)
		}
		pl.limitLeft = append(pl.limitLeft, left)
	}
}

// addPoolTypes adds the catalog's instance types the pool's requirements
// allow: those without a node image in the pool's image family to
// noImage, those with an offering the pool can buy to types.
func (s *solver) addPoolTypes(pl *pool, in Input) {
	spec := pl.class.DefaultedSpec()
	family, gpuMode := *spec.ImageFamily, gpu.Mode(&spec)
	encryptionAtHost := spec.Security != nil && spec.Security.EncryptionAtHost != nil && *spec.Security.EncryptionAtHost
	daemons := s.daemonsFor(pl, in)
	for _, it := range in.CatalogFor(pl.np.Name).InstanceTypes {
		if it == nil || (encryptionAtHost && !it.MaySupportEncryptionAtHost()) {
			continue
		}
		mt := in.Memo.instanceType(it, pl.maxPods)
		if mt.reqs.Intersects(pl.reqs) != nil {
			continue
		}
		if err := nodeimage.Supports(family, mt.it.Architecture, mt.it.HyperVGenerations); err != nil {
			pl.noImage = append(pl.noImage, noImageType{it: mt.it, reqs: mt.reqs, err: err})
			continue
		}
		// GPU sizes the image family's OS does not support, and in mode
		// Driver those AKS installs no driver for, are never offered, as
		// the provider drops them from its instance types (package gpu).
		if err := gpu.Offered(it.Name, family, gpuMode); err != nil {
			pl.gpuExcluded = append(pl.gpuExcluded, gpuExcludedType{it: it, err: err})
			continue
		}
		if instType := s.newPoolType(pl, mt, daemons); instType != nil {
			pl.types = append(pl.types, instType)
		}
	}
}

// newPoolType returns the pool's view of an instance type, or nil when
// the pool can buy none of its offerings.
func (s *solver) newPoolType(pl *pool, mt *memoType, daemons []daemon) *ptype {
	it, reqs := mt.it, mt.reqs
	instType := &ptype{it: it, reqs: reqs}
	// Only the offerings the pool allows: prices that rank types (cost
	// efficiency, the LP duals) must be ones the pool can buy.
	zoneReq := pl.reqs.Get(corev1.LabelTopologyZone)
	capacityTypeReq := pl.reqs.Get(karpv1.CapacityTypeLabelKey)
	for _, offering := range it.Offerings {
		if !zoneReq.Has(offering.Zone) || !capacityTypeReq.Has(offering.CapacityType) {
			continue
		}
		if zone := s.dom.zone(offering.Zone); offering.Available && zone >= 0 {
			bit := uint64(1) << (2*zone + ctIndex(offering.CapacityType))
			instType.offers |= bit
			instType.prices = append(instType.prices, offerPrice{bit: bit, price: offering.Price})
		}
	}
	if instType.offers == 0 {
		return nil
	}
	instType.daemon = daemonRequests(daemons, reqs)
	instType.room = s.res.vec(resources.Subtract(mt.alloc, instType.daemon))
	for _, name := range pl.limitNames {
		if name == resourceNodes {
			instType.limitCap = append(instType.limitCap, 1)
		} else {
			instType.limitCap = append(instType.limitCap, quantityValue(name, it.Capacity[name]))
		}
	}
	return instType
}

// daemonRequests sums the requests of the daemons whose terms admit the
// type's requirements.
func daemonRequests(daemons []daemon, reqs scheduling.Requirements) corev1.ResourceList {
	var dsPods []*corev1.Pod
	for _, ds := range daemons {
		if slices.ContainsFunc(ds.terms, func(term scheduling.Requirements) bool { return reqs.Intersects(term) == nil }) {
			dsPods = append(dsPods, ds.pod)
		}
	}
	if len(dsPods) > 0 {
		return resources.RequestsForPods(dsPods...)
	}
	return corev1.ResourceList{}
}

// noImageReason says which allowed instance types have no node image in
// the pool's image family, and what to change.
func noImageReason(pl *pool, types []noImageType) string {
	var names []string
	for i, noImage := range types {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(types)-i))
			break
		}
		names = append(names, fmt.Sprintf("%s (%s, Hyper-V %s)", noImage.it.Name, noImage.it.Architecture, strings.Join(noImage.it.HyperVGenerations, "/")))
	}
	family := *pl.class.DefaultedSpec().ImageFamily
	return fmt.Sprintf("NodePool %s: AKSNodeClass %s (imageFamily %s) has no AKS node image for the instance types its requirements allow: %s; "+
		"allow sizes of another architecture or Hyper-V generation in the NodePool's requirements, or pick another imageFamily",
		pl.np.Name, pl.class.Name, family, strings.Join(names, ", "))
}

type daemon struct {
	pod   *corev1.Pod
	terms []scheduling.Requirements
}

// daemonsFor lists the DaemonSets whose pods would run on the pool's
// nodes: they tolerate its taints (as daemonTolerates decides) and their
// node selector and required affinity admit its requirements. Each type
// then keeps those whose requirements also admit the type.
func (s *solver) daemonsFor(pl *pool, in Input) []daemon {
	var out []daemon
	for _, ds := range in.DaemonSets {
		if ds == nil {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: ds.Spec.Template.ObjectMeta, Spec: ds.Spec.Template.Spec}
		if !daemonTolerates(pl.taints, &pod.Spec) {
			continue
		}
		var terms []scheduling.Requirements
		for _, reqs := range requiredTerms(pod) {
			if pl.reqs.Compatible(reqs, allowWellKnown) == nil {
				terms = append(terms, reqs)
			}
		}
		if len(terms) > 0 {
			out = append(out, daemon{pod: pod, terms: terms})
		}
	}
	return out
}

// daemonTolerations are the tolerations the DaemonSet controller adds to
// every daemon pod (kubernetes pkg/controller/daemon/util/daemonset_util.go,
// AddOrUpdateDaemonPodTolerations): not-ready and unreachable NoExecute,
// and the node-condition taints NoSchedule. Host-network pods also
// tolerate network-unavailable (hostNetworkTolerations).
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

var hostNetworkTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// daemonTolerates reports whether a daemon pod with spec runs on a node
// with taints. Only NoSchedule and NoExecute taints keep it off: the
// DaemonSet controller's placement check and kube-scheduler's
// TaintToleration filter both look at those effects only (kubernetes
// pkg/controller/daemon/daemon_controller.go predicates, and
// pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go
// Filter with helper.DoNotScheduleTaintsFilterFunc); Karpenter's
// isDaemonPodCompatible likewise tolerates PreferNoSchedule for daemons.
// The controller's default tolerations count as the pod's own.
func daemonTolerates(taints scheduling.Taints, spec *corev1.PodSpec) bool {
	var binding scheduling.Taints
	for _, taint := range taints {
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			binding = append(binding, taint)
		}
	}
	if len(binding) == 0 {
		return true
	}
	tolerations := slices.Concat(spec.Tolerations, daemonTolerations)
	if spec.HostNetwork {
		tolerations = append(tolerations, hostNetworkTolerations...)
	}
	return binding.Tolerates(tolerations) == nil
}

// requiredTerms are a pod's nodeSelector ANDed with each of its required
// node affinity terms.
func requiredTerms(pod *corev1.Pod) []scheduling.Requirements {
	var terms []corev1.NodeSelectorTerm
	if affinity := pod.Spec.Affinity; affinity != nil && affinity.NodeAffinity != nil && affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) == 0 {
		return []scheduling.Requirements{scheduling.NewLabelRequirements(pod.Spec.NodeSelector)}
	}
	out := make([]scheduling.Requirements, 0, len(terms))
	for _, term := range terms {
		reqs := scheduling.NewLabelRequirements(pod.Spec.NodeSelector)
		reqs.Add(scheduling.NewNodeSelectorRequirements(term.MatchExpressions...).Values()...)
		out = append(out, reqs)
	}
	return out
}

func ctIndex(ct string) int {
	if ct == karpv1.CapacityTypeSpot {
		return 1
	}
	return 0
}

var capacityTypes = []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}

// offerMask expands zone and capacity-type masks into offering bits.
func offerMask(zones, cts uint64) uint64 {
	var mask uint64
	for z := zones; z != 0; z &= z - 1 {
		i := bits.TrailingZeros64(z)
		mask |= (cts & 3) << (2 * i)
	}
	return mask
}

// variant returns the pool narrowed by pod requirements reqs (key is their
// text), computing it once.
func (s *solver) poolVariant(pl *pool, reqs scheduling.Requirements, key string) *poolVariant {
	return s.poolVariantFor(pl, reqs, key, nil)
}

// poolVariantFor is poolVariant for requirements that also need the
// labels mustExist present on the node (key includes them).
func (s *solver) poolVariantFor(pl *pool, reqs scheduling.Requirements, key string, mustExist []string) *poolVariant {
	if vp, ok := pl.variants[key]; ok {
		return vp
	}
	vp := &poolVariant{}
	pl.variants[key] = vp
	if pl.invalid != "" {
		vp.why = pl.invalid
		return vp
	}
	if err := pl.reqs.Compatible(reqs, allowWellKnown); err != nil {
		vp.why = fmt.Sprintf("NodePool %s: the pod's node selector/affinity conflicts with the NodePool's requirements: %v", pl.np.Name, err)
		return vp
	}
	requirements := copyRequirements(pl.reqs)
	requirements.Add(reqs.Values()...)
	if key, ok := s.missingLabel(mustExist, requirements); !ok {
		vp.why = fmt.Sprintf("NodePool %s: the pod's node selector/affinity needs label %q on the node with a value in %s, which the NodePool does not give its nodes; set it in the NodePool's template labels or requirements",
			pl.np.Name, key, reqs.Get(key))
		return vp
	}
	vp.reqs = requirements
	s.narrowDomains(vp, requirements)
	s.narrowTypes(vp, pl, requirements)
	s.setCustom(vp, requirements)
	vp.ok = true
	return vp
}

// narrowDomains sets the zones and capacity types requirements allow.
func (s *solver) narrowDomains(vp *poolVariant, requirements scheduling.Requirements) {
	zr := requirements.Get(corev1.LabelTopologyZone)
	for i, zone := range s.dom.zones {
		if zr.Has(zone) {
			vp.zones |= 1 << i
		}
	}
	ctr := requirements.Get(karpv1.CapacityTypeLabelKey)
	for i, ct := range capacityTypes {
		if ctr.Has(ct) {
			vp.cts |= 1 << i
		}
	}
	vp.offerMask = offerMask(vp.zones, vp.cts)
}

// narrowTypes keeps the pool's types offered in vp's domains that meet
// requirements, with their largest room and the domains they offer.
func (s *solver) narrowTypes(vp *poolVariant, pl *pool, requirements scheduling.Requirements) {
	vp.types = newBitset(len(pl.types))
	vp.maxRoom = make(resVec, len(s.res.names))
	for _, instType := range pl.types {
		if instType.offers&vp.offerMask == 0 || instType.reqs.Intersects(requirements) != nil {
			continue
		}
		vp.types.set(instType.idx)
		vp.maxRoom.maxInPlace(instType.room)
		s.addOffered(vp, instType.offers&vp.offerMask)
	}
}

// addOffered adds the zones and capacity types of the offering bits
// offered to vp's offered domains.
func (s *solver) addOffered(vp *poolVariant, offered uint64) {
	for zone := range s.dom.zones {
		if ct := (offered >> (2 * zone)) & 3; ct != 0 {
			vp.offeredZones |= 1 << zone
			vp.offeredCTs |= ct
		}
	}
}

// setCustom keeps the requirements on keys that are neither instance type
// labels, zone nor capacity type, and their text as customKey.
func (s *solver) setCustom(vp *poolVariant, requirements scheduling.Requirements) {
	vp.custom = scheduling.NewRequirements()
	var keys []string
	for key := range requirements {
		if !s.typeKeys[key] && key != corev1.LabelTopologyZone && key != karpv1.CapacityTypeLabelKey {
			vp.custom.Add(requirements.Get(key))
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	var builder strings.Builder
	for _, key := range keys {
		builder.WriteString(requirements.Get(key).String())
		builder.WriteByte(';')
	}
	vp.customKey = builder.String()
}

// ChargedCapacity is what a NodeClaim counts against its NodePool's limits:
// the launched capacity, else the largest instance type it could become.
// Provisioning re-checks limits with the same rule just before it creates a
// NodeClaim, so the solve and the re-check never disagree.
func ChargedCapacity(nc *karpv1.NodeClaim, c *catalog.Catalog, maxPods int32) corev1.ResourceList {
	if len(nc.Status.Capacity) > 0 {
		return nc.Status.Capacity
	}
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	var caps []corev1.ResourceList
	for _, name := range reqs.Get(corev1.LabelInstanceTypeStable).Values() {
		if it, ok := c.Get(name); ok {
			caps = append(caps, it.WithMaxPods(maxPods).Capacity)
		}
	}
	return resources.MaxResources(caps...)
}

func copyRequirements(r scheduling.Requirements) scheduling.Requirements {
	out := make(scheduling.Requirements, len(r))
	for key, req := range r {
		out[key] = req
	}
	return out
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
