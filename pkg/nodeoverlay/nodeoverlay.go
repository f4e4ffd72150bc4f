// Package nodeoverlay resolves NodeOverlays (karpenter.sh/v1alpha1) into the
// prices and capacities every decision uses: per NodePool, per instance type
// and per offering (zone × capacity type). Resolve is pure: overlays,
// NodePools and the catalog in, a Resolution out, no I/O.
//
// The semantics are Karpenter v1.14.1's (sigs.k8s.io/karpenter
// pkg/controllers/nodeoverlay/controller.go:73-125,163-269 and store.go:117-286):
//
//   - Overlays are taken weight first (unset is 0), equal weights by name
//     descending: NodeOverlayList.OrderByWeight (pkg/apis/v1alpha1/
//     nodeoverlay.go:126-139). Its field doc says "alphabetical"; the code
//     sorts by name descending, and this package follows the code.
//   - An overlay selects an instance type of a NodePool when its
//     requirements are compatible with the type's requirements plus the
//     NodePool's name label and template labels; of that type it selects
//     the offerings its requirements admit (zone and capacity type). A type
//     with no selected offering is not selected.
//   - Price: on each selected offering the first overlay (the highest
//     weight) sets the price, `price` absolutely or `priceAdjustment` by
//     ±N or ±N% (cloudprovider.AdjustedPrice; never below 0).
//   - Capacity: resources are added to the type's capacity; per resource
//     the first overlay wins.
//   - Conflict: an overlay whose weight equals the lowest weight already
//     applied to one of its offerings' prices, or to one of its capacity
//     resources (the resources of the last overlay applied to that type),
//     in any NodePool, is not applied at all; its ValidationSucceeded is
//     False with reason Conflict.
//   - An overlay that fails Karpenter's runtime validation
//     (NodeOverlay.RuntimeValidate) or the CRD's rules (a plan reads files
//     no API server admitted) is not applied; reason RuntimeValidation.
//
// Invariants: Apply never changes the catalog it is given (it returns a
// copy that shares every instance type no overlay touched); an overlay is
// either applied to everything it selects or to nothing.
package nodeoverlay

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	karpcloudprovider "sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// Reasons of a NodeOverlay's ValidationSucceeded=False condition (and of
// the Warning event written with it).
const (
	// ReasonConflict: Karpenter's reason (controller.go:279).
	ReasonConflict = "Conflict"
	// ReasonRuntimeValidation: Karpenter's reason (controller.go:277).
	ReasonRuntimeValidation = "RuntimeValidation"
	// ReasonDisabled: KARPFUNC_NODE_OVERLAY=false.
	ReasonDisabled = "NodeOverlayDisabled"
)

// EnvNodeOverlay is the app setting that turns NodeOverlays off
// ("true"/"false", default true).
const EnvNodeOverlay = "KARPFUNC_NODE_OVERLAY"

// DisabledMessage is the condition and event message of every NodeOverlay
// while the setting is off.
const DisabledMessage = "NodeOverlays are turned off (app setting " + EnvNodeOverlay + "=false): this overlay changes no price or capacity; " +
	"set " + EnvNodeOverlay + "=true to apply it"

// Verdict is whether one NodeOverlay is applied, and why not.
type Verdict struct {
	Name   string
	Weight int32
	// Applied: ValidationSucceeded=True.
	Applied bool
	Reason  string
	Message string
	// Selected counts the NodePool × instance type pairs it applies to.
	Selected int
}

// Resolution is what a set of NodeOverlays does to a catalog.
type Resolution struct {
	// Verdicts in the order the overlays were taken (weight order).
	Verdicts []Verdict
	// Disabled: the setting is off; nothing is applied.
	Disabled bool
	updates  map[string]map[string]*typeUpdate // NodePool -> instance type -> update
}

type offeringKey struct{ zone, capacityType string }

// priceUpdate is the price an offering gets, from which overlay, and the
// weight and name of the last overlay that selected it (conflicts are
// judged against that weight).
type priceUpdate struct {
	change, overlay string
	lowestWeight    int32
	lowestName      string
}

type capacityUpdate struct {
	add  corev1.ResourceList
	from map[corev1.ResourceName]string
	// lowestResources and lowestWeight: the last overlay applied to the
	// type, as Karpenter's lowestWeightCapacityResources.
	lowestResources corev1.ResourceList
	lowestWeight    int32
	lowestName      string
}

type typeUpdate struct {
	price    map[offeringKey]*priceUpdate
	capacity *capacityUpdate
}

// Disabled is the Resolution while the setting is off: every overlay is
// refused by name, nothing applied.
func Disabled(overlays []*v1alpha1.NodeOverlay) *Resolution {
	res := &Resolution{Disabled: true}
	for _, o := range Ordered(overlays) {
		res.Verdicts = append(res.Verdicts, Verdict{Name: o.Name, Weight: weight(o), Reason: ReasonDisabled, Message: DisabledMessage})
	}
	return res
}

// Ordered returns overlays in the order Karpenter applies them: weight
// descending, equal weights by name descending (NodeOverlayList.OrderByWeight).
func Ordered(overlays []*v1alpha1.NodeOverlay) []*v1alpha1.NodeOverlay {
	out := slices.DeleteFunc(slices.Clone(overlays), func(o *v1alpha1.NodeOverlay) bool { return o == nil })
	slices.SortStableFunc(out, func(a, b *v1alpha1.NodeOverlay) int {
		return cmp.Or(-cmp.Compare(weight(a), weight(b)), -cmp.Compare(a.Name, b.Name))
	})
	return out
}

func weight(o *v1alpha1.NodeOverlay) int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}

// Resolve applies overlays to every NodePool's view of cat, in weight
// order, and says which were applied.
func Resolve(overlays []*v1alpha1.NodeOverlay, pools []*karpv1.NodePool, cat *catalog.Catalog) *Resolution {
	res := &Resolution{updates: map[string]map[string]*typeUpdate{}}
	r := newResolver(pools, cat)
	for _, o := range Ordered(overlays) {
		v := Verdict{Name: o.Name, Weight: weight(o)}
		if err := Validate(o); err != nil {
			v.Reason, v.Message = ReasonRuntimeValidation, err.Error()
			res.Verdicts = append(res.Verdicts, v)
			continue
		}
		selections := r.selections(o)
		if why := res.conflict(o, selections); why != "" {
			v.Reason, v.Message = ReasonConflict, why
			res.Verdicts = append(res.Verdicts, v)
			continue
		}
		for _, sel := range selections {
			res.store(o, sel)
		}
		v.Applied, v.Selected = true, len(selections)
		res.Verdicts = append(res.Verdicts, v)
	}
	return res
}

// selection is one NodePool × instance type an overlay selects, with the
// offerings it selects.
type selection struct {
	pool, instanceType string
	offerings          []offeringKey
}

type resolver struct {
	pools    []*karpv1.NodePool
	types    []*catalog.InstanceType
	typeReqs []scheduling.Requirements
	// poolReqs: the NodePool's name label and template labels, which
	// Karpenter adds to every type's requirements (controller.go:235-239).
	poolReqs []scheduling.Requirements
	// combined[p][t] is poolReqs[p] plus typeReqs[t], built on first use.
	combined [][]scheduling.Requirements
}

func newResolver(pools []*karpv1.NodePool, cat *catalog.Catalog) *resolver {
	r := &resolver{}
	for _, np := range pools {
		if np == nil {
			continue
		}
		reqs := scheduling.NewRequirements(scheduling.NewRequirement(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, np.Name))
		reqs.Add(scheduling.NewLabelRequirements(np.Spec.Template.Labels).Values()...)
		r.pools = append(r.pools, np)
		r.poolReqs = append(r.poolReqs, reqs)
	}
	if cat != nil {
		for _, it := range cat.InstanceTypes {
			if it != nil {
				r.types = append(r.types, it)
				r.typeReqs = append(r.typeReqs, it.Requirements())
			}
		}
	}
	r.combined = make([][]scheduling.Requirements, len(r.pools))
	for p := range r.combined {
		r.combined[p] = make([]scheduling.Requirements, len(r.types))
	}
	return r
}

// selections are the NodePool × instance type pairs o selects, with their
// offerings (controller.go:231-245, getOverlaidOfferings).
func (r *resolver) selections(o *v1alpha1.NodeOverlay) []selection {
	overlayReqs := Requirements(o)
	var out []selection
	for p, np := range r.pools {
		for t, it := range r.types {
			reqs := r.combined[p][t]
			if reqs == nil {
				reqs = scheduling.NewRequirements(r.poolReqs[p].Values()...)
				reqs.Add(r.typeReqs[t].Values()...)
				r.combined[p][t] = reqs
			}
			if !reqs.IsCompatible(overlayReqs) {
				continue
			}
			var offerings []offeringKey
			for _, offering := range it.Offerings {
				offeringReqs := scheduling.NewRequirements(
					scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, offering.CapacityType),
					scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, offering.Zone))
				if overlayReqs.IsCompatible(offeringReqs, scheduling.AllowUndefinedWellKnownLabels) {
					offerings = append(offerings, offeringKey{offering.Zone, offering.CapacityType})
				}
			}
			if len(offerings) > 0 {
				out = append(out, selection{pool: np.Name, instanceType: it.Name, offerings: offerings})
			}
		}
	}
	return out
}

// Requirements are o's requirements as Karpenter builds them.
func Requirements(o *v1alpha1.NodeOverlay) scheduling.Requirements {
	reqs := make([]corev1.NodeSelectorRequirement, 0, len(o.Spec.Requirements))
	for _, req := range o.Spec.Requirements {
		reqs = append(reqs, req.AsNodeSelectorRequirement())
	}
	return scheduling.NewNodeSelectorRequirements(reqs...)
}

func hasPrice(o *v1alpha1.NodeOverlay) bool {
	return o.Spec.Price != nil || o.Spec.PriceAdjustment != nil
}

func priceChange(o *v1alpha1.NodeOverlay) string {
	if o.Spec.Price != nil {
		return *o.Spec.Price
	}
	return *o.Spec.PriceAdjustment
}

// conflict says why o conflicts with an overlay applied before it ("" when
// it does not): store.go:212-236 (capacity) and 267-286 (price).
func (res *Resolution) conflict(o *v1alpha1.NodeOverlay, selections []selection) string {
	w := weight(o)
	for _, sel := range selections {
		update := res.updates[sel.pool][sel.instanceType]
		if update == nil {
			continue
		}
		if hasPrice(o) {
			for _, key := range sel.offerings {
				if prior, ok := update.price[key]; ok && prior.lowestWeight == w {
					return fmt.Sprintf("conflicts with NodeOverlay %s: both weigh %d and set the price of %s (%s, zone %q) in NodePool %s; "+
						"give one a different weight or narrow its requirements", prior.lowestName, w, sel.instanceType, key.capacityType, key.zone, sel.pool)
				}
			}
		}
		if o.Spec.Capacity != nil && update.capacity != nil && update.capacity.lowestWeight == w {
			for name := range o.Spec.Capacity {
				if _, ok := update.capacity.lowestResources[name]; ok {
					return fmt.Sprintf("conflicts with NodeOverlay %s: both weigh %d and add %s to %s in NodePool %s; "+
						"give one a different weight or narrow its requirements", update.capacity.lowestName, w, name, sel.instanceType, sel.pool)
				}
			}
		}
	}
	return ""
}

// store records o's updates on one selection (store.go:178-210,240-265).
func (res *Resolution) store(o *v1alpha1.NodeOverlay, sel selection) {
	if !hasPrice(o) && o.Spec.Capacity == nil {
		return
	}
	byType := res.updates[sel.pool]
	if byType == nil {
		byType = map[string]*typeUpdate{}
		res.updates[sel.pool] = byType
	}
	update := byType[sel.instanceType]
	if update == nil {
		update = &typeUpdate{price: map[offeringKey]*priceUpdate{}}
		byType[sel.instanceType] = update
	}
	w := weight(o)
	if hasPrice(o) {
		for _, key := range sel.offerings {
			if prior, ok := update.price[key]; ok {
				prior.lowestWeight, prior.lowestName = w, o.Name
				continue
			}
			update.price[key] = &priceUpdate{change: priceChange(o), overlay: o.Name, lowestWeight: w, lowestName: o.Name}
		}
	}
	if o.Spec.Capacity != nil {
		if update.capacity == nil {
			update.capacity = &capacityUpdate{add: corev1.ResourceList{}, from: map[corev1.ResourceName]string{}}
		}
		for name, quantity := range o.Spec.Capacity {
			if _, ok := update.capacity.add[name]; !ok {
				update.capacity.add[name] = quantity.DeepCopy()
				update.capacity.from[name] = o.Name
			}
		}
		update.capacity.lowestResources, update.capacity.lowestWeight, update.capacity.lowestName = o.Spec.Capacity, w, o.Name
	}
}

// Touches reports whether any overlay changes a price or a capacity of
// nodePool.
func (res *Resolution) Touches(nodePool string) bool {
	return res != nil && len(res.updates[nodePool]) > 0
}

// Apply returns nodePool's view of cat: the overlaid prices and
// capacities. Instance types no overlay touched are shared with cat; cat
// itself is not changed. Without updates for nodePool it returns cat.
func (res *Resolution) Apply(nodePool string, cat *catalog.Catalog) *catalog.Catalog {
	if !res.Touches(nodePool) || cat == nil {
		return cat
	}
	byType := res.updates[nodePool]
	out := &catalog.Catalog{Region: cat.Region, Zones: cat.Zones, InstanceTypes: make([]*catalog.InstanceType, len(cat.InstanceTypes))}
	for i, it := range cat.InstanceTypes {
		update := (*typeUpdate)(nil)
		if it != nil {
			update = byType[it.Name]
		}
		if update == nil {
			out.InstanceTypes[i] = it
			continue
		}
		out.InstanceTypes[i] = update.apply(it)
	}
	return out
}

// Catalogs returns every touched NodePool's view of cat (see Apply), for
// scheduler.Input.PoolCatalogs; nil when no overlay changes anything.
func (res *Resolution) Catalogs(cat *catalog.Catalog) map[string]*catalog.Catalog {
	if res == nil || len(res.updates) == 0 || cat == nil {
		return nil
	}
	out := make(map[string]*catalog.Catalog, len(res.updates))
	for pool := range res.updates {
		out[pool] = res.Apply(pool, cat)
	}
	return out
}

func (u *typeUpdate) apply(it *catalog.InstanceType) *catalog.InstanceType {
	cp := *it // shallow: Offerings and Capacity are replaced below
	cp.Capacity = it.Capacity.DeepCopy()
	if cp.Capacity == nil {
		cp.Capacity = corev1.ResourceList{}
	}
	if len(u.price) > 0 {
		cp.Offerings = slices.Clone(it.Offerings)
		for j, offering := range cp.Offerings {
			if update, ok := u.price[offeringKey{offering.Zone, offering.CapacityType}]; ok {
				cp.Offerings[j].Price = karpcloudprovider.AdjustedPrice(offering.Price, update.change)
			}
		}
	}
	if u.capacity != nil {
		for name, quantity := range u.capacity.add {
			cp.Capacity[name] = quantity.DeepCopy()
		}
	}
	return &cp
}

// Change is one offering whose price an overlay set, for plan's table.
type Change struct {
	NodePool, InstanceType, Zone, CapacityType string
	Overlay                                    string
	// Change is the overlay's price or priceAdjustment as written.
	Change string
}

// CapacityAdded is one resource an overlay adds to an instance type.
type CapacityAdded struct {
	NodePool, InstanceType string
	Resource               corev1.ResourceName
	Quantity               string
	Overlay                string
}

// Changes lists every price and capacity change, sorted by NodePool,
// instance type, zone and capacity type.
func (res *Resolution) Changes() ([]Change, []CapacityAdded) {
	if res == nil {
		return nil, nil
	}
	var prices []Change
	var capacity []CapacityAdded
	for pool, byType := range res.updates {
		for name, update := range byType {
			for key, price := range update.price {
				prices = append(prices, Change{NodePool: pool, InstanceType: name, Zone: key.zone, CapacityType: key.capacityType,
					Overlay: price.overlay, Change: price.change})
			}
			if update.capacity != nil {
				for resource, quantity := range update.capacity.add {
					capacity = append(capacity, CapacityAdded{NodePool: pool, InstanceType: name, Resource: resource,
						Quantity: quantity.String(), Overlay: update.capacity.from[resource]})
				}
			}
		}
	}
	slices.SortFunc(prices, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.NodePool, b.NodePool), cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.Zone, b.Zone),
			cmp.Compare(a.CapacityType, b.CapacityType))
	})
	slices.SortFunc(capacity, func(a, b CapacityAdded) int {
		return cmp.Or(cmp.Compare(a.NodePool, b.NodePool), cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.Resource, b.Resource))
	})
	return prices, capacity
}

// The CRD's patterns (pkg/apis/v1alpha1/nodeoverlay.go:75,80).
var (
	pricePattern           = regexp.MustCompile(`^\d+(\.\d+)?$`)
	priceAdjustmentPattern = regexp.MustCompile(`^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$`)
)

// Validate checks o by the CRD's rules (which an API server enforces at
// admission, but a plan's input files never met) and by Karpenter's
// RuntimeValidate (requirements on restricted labels, well-known
// resources in capacity).
func Validate(o *v1alpha1.NodeOverlay) error {
	var problems []string
	where := "NodeOverlay " + o.Name
	if o.Spec.Price != nil && o.Spec.PriceAdjustment != nil {
		problems = append(problems, "sets both price and priceAdjustment; keep one")
	}
	if o.Spec.Price != nil && !pricePattern.MatchString(*o.Spec.Price) {
		problems = append(problems, fmt.Sprintf("price %q is not a non-negative decimal such as \"0.25\"", *o.Spec.Price))
	}
	if o.Spec.PriceAdjustment != nil && !priceAdjustmentPattern.MatchString(*o.Spec.PriceAdjustment) {
		problems = append(problems, fmt.Sprintf("priceAdjustment %q is not +N, -N, +N%% or -N%% (at least -100%%)", *o.Spec.PriceAdjustment))
	}
	if o.Spec.Weight != nil && (*o.Spec.Weight < 1 || *o.Spec.Weight > 10000) {
		problems = append(problems, fmt.Sprintf("weight %d is outside 1..10000", *o.Spec.Weight))
	}
	if len(o.Spec.Requirements) > 100 {
		problems = append(problems, fmt.Sprintf("has %d requirements; at most 100", len(o.Spec.Requirements)))
	}
	for _, req := range o.Spec.Requirements {
		if problem := requirementProblem(req); problem != "" {
			problems = append(problems, problem)
		}
	}
	if err := o.RuntimeValidate(context.Background()); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", where, strings.Join(problems, "; "))
}

// requirementProblem applies the CRD's rules on one requirement
// (nodeoverlay.go:64-66 and the operator enum).
func requirementProblem(req v1alpha1.NodeSelectorRequirement) string {
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			return fmt.Sprintf("requirement %s %s has no values", req.Key, req.Operator)
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, "Gte", "Lte":
		if len(req.Values) != 1 {
			return fmt.Sprintf("requirement %s %s needs exactly one value", req.Key, req.Operator)
		}
		if n, err := strconv.Atoi(req.Values[0]); err != nil || n < 0 {
			return fmt.Sprintf("requirement %s %s needs a non-negative integer, not %q", req.Key, req.Operator, req.Values[0])
		}
	default:
		return fmt.Sprintf("requirement %s has operator %q; use In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte", req.Key, req.Operator)
	}
	return ""
}
