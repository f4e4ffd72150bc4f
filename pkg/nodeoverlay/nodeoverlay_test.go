package nodeoverlay_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
)

const (
	d2 = "Standard_D2s_v5"
	d4 = "Standard_D4s_v5"
	e2 = "Standard_E2s_v5"
)

func testCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	full, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	out := &catalog.Catalog{Region: full.Region, Zones: full.Zones}
	for _, name := range []string{d2, d4, e2} {
		it, ok := full.Get(name)
		if !ok {
			t.Fatalf("catalog has no %s", name)
		}
		out.InstanceTypes = append(out.InstanceTypes, it)
	}
	return out
}

func pool(name string, labels map[string]string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	return np
}

type overlayOpt func(*v1alpha1.NodeOverlay)

func overlay(name string, opts ...overlayOpt) *v1alpha1.NodeOverlay {
	o := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

func weight(w int32) overlayOpt { return func(o *v1alpha1.NodeOverlay) { o.Spec.Weight = &w } }
func price(p string) overlayOpt { return func(o *v1alpha1.NodeOverlay) { o.Spec.Price = &p } }
func adjust(p string) overlayOpt {
	return func(o *v1alpha1.NodeOverlay) { o.Spec.PriceAdjustment = &p }
}
func req(key string, op corev1.NodeSelectorOperator, values ...string) overlayOpt {
	return func(o *v1alpha1.NodeOverlay) {
		o.Spec.Requirements = append(o.Spec.Requirements, v1alpha1.NodeSelectorRequirement{Key: key, Operator: op, Values: values})
	}
}
func types(names ...string) overlayOpt {
	return req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...)
}
func capacity(pairs ...string) overlayOpt {
	return func(o *v1alpha1.NodeOverlay) {
		if o.Spec.Capacity == nil {
			o.Spec.Capacity = corev1.ResourceList{}
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			o.Spec.Capacity[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
	}
}

// offeringPrice is the price of name's offering (zone, capacity type) in cat.
func offeringPrice(t *testing.T, cat *catalog.Catalog, name, zone, ct string) float64 {
	t.Helper()
	it, ok := cat.Get(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o.Price
		}
	}
	t.Fatalf("%s has no offering %s %s", name, zone, ct)
	return 0
}

func verdicts(res *nodeoverlay.Resolution) map[string]nodeoverlay.Verdict {
	out := map[string]nodeoverlay.Verdict{}
	for _, v := range res.Verdicts {
		out[v.Name] = v
	}
	return out
}

func TestOrderedIsWeightThenNameDescending(t *testing.T) {
	got := nodeoverlay.Ordered([]*v1alpha1.NodeOverlay{
		overlay("a"), overlay("b", weight(5)), overlay("c", weight(5)), overlay("d", weight(1)), overlay("e")})
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
	}
	// As NodeOverlayList.OrderByWeight: equal weights by name descending,
	// although its field doc says alphabetical.
	if want := []string{"c", "b", "d", "e", "a"}; !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
}

func TestPrices(t *testing.T) {
	cat := testCatalog(t)
	zone := cat.Zones[0]
	base := offeringPrice(t, cat, d2, zone, karpv1.CapacityTypeOnDemand)
	baseSpot := offeringPrice(t, cat, d2, zone, karpv1.CapacityTypeSpot)
	cases := []struct {
		name     string
		overlays []*v1alpha1.NodeOverlay
		// want on-demand and spot prices of d2 in zone.
		wantOD, wantSpot float64
		refused          map[string]string // overlay -> reason
	}{
		{name: "absolute price", overlays: []*v1alpha1.NodeOverlay{overlay("o", types(d2), price("0.01"))}, wantOD: 0.01, wantSpot: 0.01},
		{name: "minus percent", overlays: []*v1alpha1.NodeOverlay{overlay("o", types(d2), adjust("-50%"))}, wantOD: base / 2, wantSpot: baseSpot / 2},
		{name: "plus percent", overlays: []*v1alpha1.NodeOverlay{overlay("o", types(d2), adjust("+10%"))}, wantOD: base * 1.1, wantSpot: baseSpot * 1.1},
		{name: "plus absolute", overlays: []*v1alpha1.NodeOverlay{overlay("o", types(d2), adjust("+0.5"))}, wantOD: base + 0.5, wantSpot: baseSpot + 0.5},
		{name: "minus absolute floors at zero", overlays: []*v1alpha1.NodeOverlay{overlay("o", types(d2), adjust("-5"))}, wantOD: 0, wantSpot: 0},
		{name: "minus 100 percent", overlays: []*v1alpha1.NodeOverlay{overlay("o", types(d2), adjust("-100%"))}, wantOD: 0, wantSpot: 0},
		{name: "capacity type selects offerings",
			overlays: []*v1alpha1.NodeOverlay{overlay("o", types(d2), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot), price("0.001"))},
			wantOD:   base, wantSpot: 0.001},
		{name: "higher weight wins",
			overlays: []*v1alpha1.NodeOverlay{overlay("low", types(d2), weight(5), price("2")), overlay("high", types(d2), weight(10), price("1"))},
			wantOD:   1, wantSpot: 1},
		{name: "equal weight conflict: the later by name descending is refused",
			overlays: []*v1alpha1.NodeOverlay{overlay("a", types(d2), weight(5), price("2")), overlay("b", types(d2), weight(5), price("1"))},
			wantOD:   1, wantSpot: 1, refused: map[string]string{"a": nodeoverlay.ReasonConflict}},
		{name: "unset weights conflict too",
			overlays: []*v1alpha1.NodeOverlay{overlay("a", types(d2), price("2")), overlay("b", types(d2), adjust("-1%"))},
			wantOD:   base * 0.99, wantSpot: baseSpot * 0.99, refused: map[string]string{"a": nodeoverlay.ReasonConflict}},
		{name: "equal weight on disjoint offerings is no conflict",
			overlays: []*v1alpha1.NodeOverlay{
				overlay("a", types(d2), weight(5), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot), price("0.002")),
				overlay("b", types(d2), weight(5), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand), price("0.003"))},
			wantOD: 0.003, wantSpot: 0.002},
		{name: "a lower overlay already selecting the offering sets the weight conflicts are judged by",
			// high applies; c (weight 5) selects the same offering and
			// changes nothing but the weight on record; b (weight 5) then
			// conflicts with c (store.go:255-258).
			overlays: []*v1alpha1.NodeOverlay{overlay("high", types(d2), weight(10), price("1")),
				overlay("b", types(d2), weight(5), price("3")), overlay("c", types(d2), weight(5), price("2"))},
			wantOD: 1, wantSpot: 1, refused: map[string]string{"b": nodeoverlay.ReasonConflict}},
		{name: "price and priceAdjustment together are refused",
			overlays: []*v1alpha1.NodeOverlay{overlay("both", types(d2), price("1"), adjust("+1"))},
			wantOD:   base, wantSpot: baseSpot, refused: map[string]string{"both": nodeoverlay.ReasonRuntimeValidation}},
		{name: "an unsigned percentage is refused",
			overlays: []*v1alpha1.NodeOverlay{overlay("bad", types(d2), adjust("10%"))},
			wantOD:   base, wantSpot: baseSpot, refused: map[string]string{"bad": nodeoverlay.ReasonRuntimeValidation}},
		{name: "an overlay selecting another type changes nothing here",
			overlays: []*v1alpha1.NodeOverlay{overlay("other", types(e2), price("9"))},
			wantOD:   base, wantSpot: baseSpot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := nodeoverlay.Resolve(tc.overlays, []*karpv1.NodePool{pool("default", nil)}, cat)
			got := res.Apply("default", cat)
			if od := offeringPrice(t, got, d2, zone, karpv1.CapacityTypeOnDemand); math.Abs(od-tc.wantOD) > 1e-9 {
				t.Errorf("on-demand price %v, want %v", od, tc.wantOD)
			}
			if spot := offeringPrice(t, got, d2, zone, karpv1.CapacityTypeSpot); math.Abs(spot-tc.wantSpot) > 1e-9 {
				t.Errorf("spot price %v, want %v", spot, tc.wantSpot)
			}
			for name, v := range verdicts(res) {
				if reason, refused := tc.refused[name]; refused {
					if v.Applied || v.Reason != reason || v.Message == "" {
						t.Errorf("%s: %+v, want refused with %s and a message", name, v, reason)
					}
				} else if !v.Applied {
					t.Errorf("%s refused: %s: %s", name, v.Reason, v.Message)
				}
			}
			if before := offeringPrice(t, cat, d2, zone, karpv1.CapacityTypeOnDemand); before != base {
				t.Errorf("the base catalog changed: %v, was %v", before, base)
			}
		})
	}
}

func TestConflictMessageNamesTheOther(t *testing.T) {
	cat := testCatalog(t)
	res := nodeoverlay.Resolve([]*v1alpha1.NodeOverlay{overlay("a", types(d2), weight(5), price("2")), overlay("b", types(d2), weight(5), price("1"))},
		[]*karpv1.NodePool{pool("default", nil)}, cat)
	v := verdicts(res)["a"]
	for _, want := range []string{"NodeOverlay b", "weigh 5", d2, "NodePool default"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message %q lacks %q", v.Message, want)
		}
	}
}

func TestCapacity(t *testing.T) {
	cat := testCatalog(t)
	cases := []struct {
		name     string
		overlays []*v1alpha1.NodeOverlay
		want     map[string]string // resource -> quantity on d2
		refused  []string
	}{
		{name: "adds an extended resource", overlays: []*v1alpha1.NodeOverlay{overlay("fuse", types(d2), capacity("smarter-devices/fuse", "1"))},
			want: map[string]string{"smarter-devices/fuse": "1"}},
		{name: "per resource the higher weight wins, others merge",
			overlays: []*v1alpha1.NodeOverlay{overlay("high", types(d2), weight(10), capacity("smarter-devices/fuse", "1")),
				overlay("low", types(d2), weight(5), capacity("smarter-devices/fuse", "2", "hugepages-2Mi", "100Mi"))},
			want: map[string]string{"smarter-devices/fuse": "1", "hugepages-2Mi": "100Mi"}},
		{name: "equal weight on one resource conflicts",
			overlays: []*v1alpha1.NodeOverlay{overlay("a", types(d2), weight(5), capacity("smarter-devices/fuse", "2")),
				overlay("b", types(d2), weight(5), capacity("smarter-devices/fuse", "1"))},
			want: map[string]string{"smarter-devices/fuse": "1"}, refused: []string{"a"}},
		{name: "equal weight on different resources merges",
			overlays: []*v1alpha1.NodeOverlay{overlay("a", types(d2), weight(5), capacity("example.com/a", "2")),
				overlay("b", types(d2), weight(5), capacity("example.com/b", "1"))},
			want: map[string]string{"example.com/a": "2", "example.com/b": "1"}},
		{name: "well-known resources are refused",
			overlays: []*v1alpha1.NodeOverlay{overlay("cpu", types(d2), capacity("cpu", "64"))},
			want:     map[string]string{}, refused: []string{"cpu"}},
		{name: "a conflicting overlay's price is not applied either",
			overlays: []*v1alpha1.NodeOverlay{overlay("a", types(d2), weight(5), capacity("example.com/a", "2"), price("0")),
				overlay("b", types(d2), weight(5), capacity("example.com/a", "1"))},
			want: map[string]string{"example.com/a": "1"}, refused: []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := nodeoverlay.Resolve(tc.overlays, []*karpv1.NodePool{pool("default", nil)}, cat)
			got, _ := res.Apply("default", cat).Get(d2)
			base, _ := cat.Get(d2)
			for name, q := range got.Capacity {
				if _, known := base.Capacity[name]; known {
					if !q.Equal(base.Capacity[name]) {
						was := base.Capacity[name]
						t.Errorf("%s changed: %s, was %s", name, q.String(), was.String())
					}
					continue
				}
				want, ok := tc.want[string(name)]
				if !ok {
					t.Errorf("unexpected %s=%s", name, q.String())
				} else if !q.Equal(resource.MustParse(want)) {
					t.Errorf("%s=%s, want %s", name, q.String(), want)
				}
			}
			for name, want := range tc.want {
				if _, ok := got.Capacity[corev1.ResourceName(name)]; !ok {
					t.Errorf("%s missing, want %s", name, want)
				}
				alloc := got.Allocatable()[corev1.ResourceName(name)]
				if !alloc.Equal(resource.MustParse(want)) {
					t.Errorf("allocatable %s=%s, want %s", name, alloc.String(), want)
				}
			}
			if _, ok := cat.Get(d2); ok {
				for name := range tc.want {
					if _, leaked := base.Capacity[corev1.ResourceName(name)]; leaked {
						t.Errorf("the base catalog gained %s", name)
					}
				}
			}
			v := verdicts(res)
			if pr := offeringPrice(t, res.Apply("default", cat), d2, cat.Zones[0], karpv1.CapacityTypeOnDemand); pr == 0 && slices.Contains(tc.refused, "a") {
				t.Errorf("the refused overlay's price was applied")
			}
			for name, verdict := range v {
				if slices.Contains(tc.refused, name) == verdict.Applied {
					t.Errorf("%s: %+v, refused %v", name, verdict, tc.refused)
				}
			}
		})
	}
}

func TestNodePoolSelection(t *testing.T) {
	cat := testCatalog(t)
	zone := cat.Zones[0]
	base := offeringPrice(t, cat, d2, zone, karpv1.CapacityTypeOnDemand)
	pools := []*karpv1.NodePool{pool("gpu", map[string]string{"team": "ml"}), pool("general", nil)}
	cases := []struct {
		name     string
		overlays []*v1alpha1.NodeOverlay
		touched  map[string]bool // NodePool -> d2 price changed
		refused  []string
	}{
		{name: "by the nodepool label", overlays: []*v1alpha1.NodeOverlay{overlay("o", req(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "general"), price("0"))},
			touched: map[string]bool{"general": true}},
		{name: "by a template label; pools without it are not selected",
			overlays: []*v1alpha1.NodeOverlay{overlay("o", req("team", corev1.NodeSelectorOpIn, "ml"), price("0"))},
			touched:  map[string]bool{"gpu": true}},
		{name: "no requirements select everything", overlays: []*v1alpha1.NodeOverlay{overlay("o", price("0"))},
			touched: map[string]bool{"gpu": true, "general": true}},
		{name: "a conflict in one NodePool refuses the overlay in every NodePool",
			// z goes first (name descending) and takes general; y weighs
			// the same and selects both: refused in gpu too.
			overlays: []*v1alpha1.NodeOverlay{overlay("z", req(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "general"), types(d2), price("0")),
				overlay("y", types(d2), price("0"))},
			touched: map[string]bool{"general": true}, refused: []string{"y"}},
		{name: "a numeric requirement on a catalog label",
			overlays: []*v1alpha1.NodeOverlay{overlay("o", req("karpenter.azure.com/sku-cpu", corev1.NodeSelectorOpGt, "3"), price("0"))},
			touched:  map[string]bool{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := nodeoverlay.Resolve(tc.overlays, pools, cat)
			for _, np := range pools {
				changed := offeringPrice(t, res.Apply(np.Name, cat), d2, zone, karpv1.CapacityTypeOnDemand) != base
				if changed != tc.touched[np.Name] {
					t.Errorf("NodePool %s: d2 price changed %v, want %v", np.Name, changed, tc.touched[np.Name])
				}
			}
			for name, verdict := range verdicts(res) {
				if slices.Contains(tc.refused, name) == verdict.Applied {
					t.Errorf("%s: %+v, refused %v", name, verdict, tc.refused)
				}
			}
		})
	}
}

func TestNumericRequirementSelectsLargerTypes(t *testing.T) {
	cat := testCatalog(t)
	zone := cat.Zones[0]
	res := nodeoverlay.Resolve([]*v1alpha1.NodeOverlay{overlay("big", req("karpenter.azure.com/sku-cpu", corev1.NodeSelectorOpGt, "3"), price("0"))},
		[]*karpv1.NodePool{pool("default", nil)}, cat)
	got := res.Apply("default", cat)
	if p := offeringPrice(t, got, d4, zone, karpv1.CapacityTypeOnDemand); p != 0 {
		t.Errorf("%s (4 vCPUs) price %v, want 0", d4, p)
	}
	if p := offeringPrice(t, got, d2, zone, karpv1.CapacityTypeOnDemand); p == 0 {
		t.Errorf("%s (2 vCPUs) was overlaid", d2)
	}
}

func TestApplySharesUntouchedTypes(t *testing.T) {
	cat := testCatalog(t)
	res := nodeoverlay.Resolve([]*v1alpha1.NodeOverlay{overlay("o", types(d2), price("0"))}, []*karpv1.NodePool{pool("default", nil), pool("other", nil)}, cat)
	got := res.Apply("default", cat)
	for i, it := range got.InstanceTypes {
		if shared := it == cat.InstanceTypes[i]; shared == (it.Name == d2) {
			t.Errorf("%s shared %v", it.Name, shared)
		}
	}
	if res.Apply("nobody", cat) != cat {
		t.Errorf("a NodePool no overlay touches got a copy")
	}
	if len(res.Catalogs(cat)) != 2 {
		t.Errorf("Catalogs has %d pools, want 2", len(res.Catalogs(cat)))
	}
}

func TestDisabledRefusesEveryOverlay(t *testing.T) {
	cat := testCatalog(t)
	res := nodeoverlay.Disabled([]*v1alpha1.NodeOverlay{overlay("a", price("0")), overlay("b", capacity("example.com/x", "1"))})
	if len(res.Verdicts) != 2 {
		t.Fatalf("verdicts %+v", res.Verdicts)
	}
	for _, v := range res.Verdicts {
		if v.Applied || v.Reason != nodeoverlay.ReasonDisabled || !strings.Contains(v.Message, nodeoverlay.EnvNodeOverlay) {
			t.Errorf("%+v", v)
		}
	}
	if res.Apply("default", cat) != cat || res.Catalogs(cat) != nil {
		t.Errorf("a disabled resolution changed the catalog")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		o    *v1alpha1.NodeOverlay
		want string // "" valid, else a substring of the error
	}{
		{"valid", overlay("o", types(d2), adjust("-15%"), weight(10)), ""},
		{"valid absolute", overlay("o", price("1.25")), ""},
		{"negative price", overlay("o", price("-1")), "price"},
		{"percent below -100", overlay("o", adjust("-150%")), "priceAdjustment"},
		{"weight 0", overlay("o", weight(0)), "weight"},
		{"In without values", overlay("o", req("team", corev1.NodeSelectorOpIn)), "no values"},
		{"Gt with a word", overlay("o", req("karpenter.azure.com/sku-cpu", corev1.NodeSelectorOpGt, "four")), "integer"},
		{"unknown operator", overlay("o", req("team", "Near", "x")), "operator"},
		{"memory capacity", overlay("o", capacity("memory", "1Gi")), "memory"},
		{"restricted label", overlay("o", req("kubernetes.io/hostname", corev1.NodeSelectorOpIn, "x")), "restricted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := nodeoverlay.Validate(tc.o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
