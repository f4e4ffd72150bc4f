package plan

import (
	"fmt"
	"io"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// NodeOverlay is one input NodeOverlay as the plan resolved it: the
// ValidationSucceeded condition the live loop would write.
type NodeOverlay struct {
	Name    string `json:"name"`
	Weight  int32  `json:"weight"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Selects counts the NodePool × instance type pairs it changes.
	Selects int `json:"selects"`
}

// OverlaidPrice is one offering whose price a NodeOverlay changed, in one
// NodePool.
type OverlaidPrice struct {
	NodePool            string  `json:"nodePool"`
	InstanceType        string  `json:"instanceType"`
	Zone                string  `json:"zone"`
	CapacityType        string  `json:"capacityType"`
	CatalogPricePerHour float64 `json:"catalogPricePerHour"`
	PricePerHour        float64 `json:"pricePerHour"`
	Overlay             string  `json:"overlay"`
}

// Overlays resolves the input's NodeOverlays against its NodePools and
// cat, as the live loop does on every pass.
func (o *Objects) Overlays(cat *catalog.Catalog) *nodeoverlay.Resolution {
	return nodeoverlay.Resolve(o.NodeOverlays, o.NodePools, cat)
}

// OverlaidInput is Input with every NodePool's NodeOverlays applied.
func (o *Objects) OverlaidInput(cat *catalog.Catalog, res *nodeoverlay.Resolution) scheduler.Input {
	in := o.Input(cat)
	in.PoolCatalogs = res.Catalogs(cat)
	return in
}

// WithOverlays adds what res did to the output: the overlays' verdicts,
// every overlaid offering price, and the catalog price beside each new
// NodeClaim whose price an overlay changed. cat is the catalog before
// overlays.
func (o Output) WithOverlays(res *nodeoverlay.Resolution, cat *catalog.Catalog) Output {
	if res == nil || len(res.Verdicts) == 0 {
		return o
	}
	for _, v := range res.Verdicts {
		o.NodeOverlays = append(o.NodeOverlays, NodeOverlay{Name: v.Name, Weight: v.Weight, Applied: v.Applied, Reason: v.Reason,
			Message: v.Message, Selects: v.Selected})
	}
	changes, _ := res.Changes()
	type offering struct{ pool, it, zone, ct string }
	byOffering := map[offering]OverlaidPrice{}
	for _, change := range changes {
		base, ok := offeringPrice(cat, change.InstanceType, change.Zone, change.CapacityType)
		if !ok {
			continue
		}
		overlaid, _ := offeringPrice(res.Apply(change.NodePool, cat), change.InstanceType, change.Zone, change.CapacityType)
		price := OverlaidPrice{NodePool: change.NodePool, InstanceType: change.InstanceType, Zone: change.Zone, CapacityType: change.CapacityType,
			CatalogPricePerHour: base, PricePerHour: overlaid, Overlay: change.Overlay}
		o.OverlaidPrices = append(o.OverlaidPrices, price)
		byOffering[offering{change.NodePool, change.InstanceType, change.Zone, change.CapacityType}] = price
	}
	o.NodeClaims = append([]NodeClaim(nil), o.NodeClaims...)
	for i, nc := range o.NodeClaims {
		if price, ok := byOffering[offering{nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType}]; ok {
			base := price.CatalogPricePerHour
			o.NodeClaims[i].CatalogPricePerHour, o.NodeClaims[i].Overlay = &base, price.Overlay
		}
	}
	return o
}

func offeringPrice(cat *catalog.Catalog, name, zone, capacityType string) (float64, bool) {
	it, ok := cat.Get(name)
	if !ok {
		return 0, false
	}
	for _, offering := range it.Offerings {
		if offering.Zone == zone && offering.CapacityType == capacityType {
			return offering.Price, true
		}
	}
	return 0, false
}

// writeOverlays writes the NODEOVERLAY table (each overlay, applied or
// why not) and the new NodeClaims priced by an overlay. Every overlaid
// offering is in the JSON's overlaidPrices.
func (o Output) writeOverlays(w io.Writer) {
	if len(o.NodeOverlays) == 0 {
		return
	}
	fmt.Fprintln(w, "NODEOVERLAY\tWEIGHT\tAPPLIED\tSELECTS\tOVERLAID PRICES\tREASON")
	prices := map[string]int{}
	for _, p := range o.OverlaidPrices {
		prices[p.Overlay]++
	}
	for _, ov := range o.NodeOverlays {
		why := "-"
		if !ov.Applied {
			why = ov.Reason + ": " + ov.Message
		}
		fmt.Fprintf(w, "%s\t%d\t%t\t%d\t%d\t%s\n", ov.Name, ov.Weight, ov.Applied, ov.Selects, prices[ov.Name], why)
	}
	fmt.Fprintln(w)
	header := false
	for i, nc := range o.NodeClaims {
		if nc.CatalogPricePerHour == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "OVERLAID NODECLAIM\tINSTANCE TYPE\tCATALOG $/HOUR\t$/HOUR\tOVERLAY")
			header = true
		}
		fmt.Fprintf(w, "%d\t%s\t%.4f\t%.4f\t%s\n", i+1, nc.InstanceType, *nc.CatalogPricePerHour, nc.PricePerHour, nc.Overlay)
	}
	if header {
		fmt.Fprintln(w)
	}
}
