package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/provisioning"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// Output is the JSON `karpfunc plan -o json` prints.
type Output struct {
	NodeClaims        []NodeClaim     `json:"nodeClaims"`
	ExistingNodes     []ExistingNode  `json:"existingNodes"`
	Unschedulable     []Unschedulable `json:"unschedulable"`
	TotalPricePerHour float64         `json:"totalPricePerHour"`
	SolveSeconds      float64         `json:"solveSeconds"`
	// Pods counts the pending pods by outcome, in the vocabulary of the
	// live Provision pass's log (node, in-flight, new, unschedulable,
	// deferred; a plan never defers).
	Pods map[provisioning.Outcome]int `json:"pods"`
	// Summary is that log's summary line for this plan.
	Summary string `json:"summary"`
	// StaticNodePools are the static NodePools (spec.replicas) and what
	// the pass does to keep their replicas (see KeepStatic); the price of
	// the NodeClaims they create is in TotalPricePerHour.
	StaticNodePools []StaticNodePool `json:"staticNodePools"`
	// NodeOverlays are the input's NodeOverlays, whether each is applied
	// and why not; OverlaidPrices every offering price they change (see
	// WithOverlays).
	NodeOverlays   []NodeOverlay   `json:"nodeOverlays,omitempty"`
	OverlaidPrices []OverlaidPrice `json:"overlaidPrices,omitempty"`
	// CapacityBuffers are the room each CapacityBuffer keeps (see
	// WithBuffers); its virtual pods are named in the NodeClaims and
	// existing nodes that hold them, and not counted in Pods.
	CapacityBuffers []CapacityBuffer `json:"capacityBuffers"`
}

// NodeClaim is one NodeClaim the plan would create, priced at its cheapest
// allowed offering (the one that would be launched when available).
type NodeClaim struct {
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
	// CatalogPricePerHour and Overlay: set when a NodeOverlay changed
	// PricePerHour from the catalog's price.
	CatalogPricePerHour *float64 `json:"catalogPricePerHour,omitempty"`
	Overlay             string   `json:"overlay,omitempty"`
	InstanceTypeOptions []string `json:"instanceTypeOptions"`
	Pods                []string `json:"pods"`
}

// ExistingNode is capacity already in the cluster that takes pending pods: a
// Node, or a NodeClaim whose Node has not registered yet.
type ExistingNode struct {
	Node      string   `json:"node,omitempty"`
	NodeClaim string   `json:"nodeClaim,omitempty"`
	Pods      []string `json:"pods"`
}

// Unschedulable is a pod no NodePool can take, and why.
type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// NewOutput renders a scheduler result.
func NewOutput(r scheduler.Result, solve time.Duration) Output {
	out := Output{NodeClaims: []NodeClaim{}, ExistingNodes: []ExistingNode{}, Unschedulable: []Unschedulable{},
		StaticNodePools: []StaticNodePool{}, CapacityBuffers: []CapacityBuffer{}, SolveSeconds: solve.Seconds()}
	total := 0.0
	for _, c := range r.NewNodeClaims {
		nc := NodeClaim{NodePool: c.NodePool.Name, Pods: podNames(c.Pods), InstanceTypeOptions: make([]string, 0, len(c.InstanceTypes))}
		for _, it := range c.InstanceTypes {
			nc.InstanceTypeOptions = append(nc.InstanceTypeOptions, it.Name)
		}
		if it, o := c.Cheapest(); it != nil {
			nc.InstanceType, nc.Zone, nc.CapacityType, nc.PricePerHour = it.Name, o.Zone, o.CapacityType, o.Price
			total += o.Price
		}
		out.NodeClaims = append(out.NodeClaims, nc)
	}
	for _, e := range r.Existing {
		out.ExistingNodes = append(out.ExistingNodes, ExistingNode{Node: e.Node, NodeClaim: e.NodeClaim, Pods: podNames(e.Pods)})
	}
	for _, u := range realOnly(r).Unschedulable {
		out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: podName(u.Pod), Reason: u.Reason})
	}
	out.TotalPricePerHour = math.Round(total*1e6) / 1e6
	acc := provisioning.PlannedOutcomes(realOnly(r))
	out.Pods = map[provisioning.Outcome]int{}
	for _, o := range provisioning.Outcomes {
		out.Pods[o] = acc.Count(o)
	}
	out.Summary = acc.String()
	return out
}

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func podNames(ps []*corev1.Pod) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = podName(p)
	}
	return out
}

// WriteJSON writes o as indented JSON.
func (o Output) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

// WriteTable writes o for people: new NodeClaims, existing capacity used,
// unschedulable pods, and the totals.
func (o Output) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if len(o.NodeClaims) > 0 {
		fmt.Fprintln(tw, "NEW NODECLAIM\tNODEPOOL\tINSTANCE TYPE\tZONE\tCAPACITY\t$/HOUR\tOPTIONS\tPODS")
		for i, c := range o.NodeClaims {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.4f\t%d\t%s\n", i+1, c.NodePool, orDash(c.InstanceType), orDash(c.Zone), orDash(c.CapacityType),
				c.PricePerHour, len(c.InstanceTypeOptions), abbreviate(c.Pods))
		}
		fmt.Fprintln(tw)
	}
	if len(o.StaticNodePools) > 0 {
		fmt.Fprintln(tw, "STATIC NODEPOOL\tREPLICAS\tNODECLAIMS\tCREATE\tINSTANCE TYPE\t$/HOUR EACH\tDELETE\tWAITING")
		for _, sp := range o.StaticNodePools {
			instanceType, price := "-", 0.0
			if len(sp.Create) > 0 {
				instanceType, price = orDash(sp.Create[0].InstanceType), sp.Create[0].PricePerHour
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%.4f\t%s\t%s\n", sp.NodePool, sp.Replicas, sp.NodeClaims, len(sp.Create),
				instanceType, price, orDash(abbreviate(sp.Delete)), orDash(sp.Waiting))
		}
		fmt.Fprintln(tw)
	}
	o.writeOverlays(tw)
	if len(o.CapacityBuffers) > 0 {
		fmt.Fprintln(tw, "CAPACITY BUFFER\tREPLICAS\tON EXISTING\tON NEW\tWHERE")
		for _, b := range o.CapacityBuffers {
			fmt.Fprintln(tw, bufferRow(b))
		}
		fmt.Fprintln(tw)
	}
	if len(o.ExistingNodes) > 0 {
		fmt.Fprintln(tw, "EXISTING\tPODS")
		for _, e := range o.ExistingNodes {
			name := e.Node
			if name == "" {
				name = "nodeclaim/" + e.NodeClaim
			}
			fmt.Fprintf(tw, "%s\t%s\n", name, abbreviate(e.Pods))
		}
		fmt.Fprintln(tw)
	}
	if len(o.Unschedulable) > 0 {
		fmt.Fprintln(tw, "UNSCHEDULABLE\tREASON")
		for _, u := range o.Unschedulable {
			fmt.Fprintf(tw, "%s\t%s\n", u.Pod, u.Reason)
		}
		fmt.Fprintln(tw)
	}
	static := 0
	for _, sp := range o.StaticNodePools {
		static += len(sp.Create)
	}
	staticNote := ""
	if static > 0 {
		staticNote = fmt.Sprintf(" and %d static", static)
	}
	fmt.Fprintf(tw, "%s; %d new NodeClaims%s ($%.4f/hour); solved in %.3fs\n",
		o.Summary, len(o.NodeClaims), staticNote, o.TotalPricePerHour, o.SolveSeconds)
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// abbreviate lists up to three pods, then how many more.
func abbreviate(pods []string) string {
	if len(pods) <= 3 {
		return strings.Join(pods, ",")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(pods[:3], ","), len(pods)-3)
}
