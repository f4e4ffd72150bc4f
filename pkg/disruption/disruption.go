// Package disruption decides which nodes karpfunc takes away and why:
// expiration, emptiness, static drift, drift, multi-node and single-node
// consolidation, in Karpenter's order, within NodePool disruption budgets.
// It is pure: a cluster snapshot and a clock in, one command (and every
// refusal with its reason) out. The Disruption function acts on the
// command; `karpfunc plan` prints it.
//
// Invariants:
//   - One command per decision, from the first method (in order) that has
//     one; expiration is forceful and reported apart, outside budgets.
//   - Whether pods fit elsewhere is asked of pkg/scheduler, the same engine
//     that provisions; there is no second scheduler.
//   - A candidate never carries a pod that may not be evicted
//     (do-not-disrupt, a PDB with no disruptions allowed) and never belongs
//     to a NodeClaim that is deleting, not Initialized, or not Ready.
//   - No command takes more nodes from a NodePool than its budgets allow
//     for the command's reason, counting nodes already disrupting.
//   - Drift never starts for a reason State.DriftHold holds (the cluster's
//     maintenance windows); the held node is explained with the hold's
//     reason and stays a candidate for every other method.
//   - A static NodePool's nodes (spec.replicas) are never consolidated and
//     drift only by StaticDrift: one pod-less NodeClaim of the pool per
//     drifted node, launched first, only while the pool holds no more
//     NodeClaims than replicas and within limits.nodes.
//   - A replacement is one NodeClaim, strictly cheaper than what it
//     replaces (consolidation), or whatever the pods need (drift); with
//     Options.Rebalance, rebalancing consolidation may replace a group of
//     nodes with up to as many NodeClaims, together at least
//     MinRebalanceSaving cheaper.
package disruption

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// Reason is why a node is disrupted; the first three are Karpenter's
// budget reasons.
type Reason string

const (
	ReasonEmpty         Reason = Reason(karpv1.DisruptionReasonEmpty)
	ReasonDrifted       Reason = Reason(karpv1.DisruptionReasonDrifted)
	ReasonUnderutilized Reason = Reason(karpv1.DisruptionReasonUnderutilized)
	ReasonExpired       Reason = "Expired"
)

// Karpenter's constants.
const (
	// ValidationDelay is how long a command waits before it is re-checked
	// and acted on (emptiness and consolidation).
	ValidationDelay = 15 * time.Second
	// MinSpotToSpotTypes is how many cheaper spot types a spot node's
	// replacement needs (MinInstanceTypesForSpotToSpotConsolidation).
	MinSpotToSpotTypes = 15
	// BalancedThreshold is the lowest score Balanced approves.
	BalancedThreshold = 0.5
	// DefaultBudget applies to a NodePool that lists none.
	DefaultBudget = "10%"
)

// Options tune a decision.
type Options struct {
	// SpotToSpot allows replacing spot nodes with cheaper spot nodes
	// (Karpenter's SpotToSpotConsolidation feature gate, off by default).
	SpotToSpot bool
	// Rebalance adds RebalancingConsolidation after Karpenter's methods:
	// candidates replaced by several cheaper nodes of other shapes. Off by
	// default: Karpenter replaces nodes with at most one.
	Rebalance bool
	// TimeLimit bounds the wall-clock time consolidation spends simulating
	// (Karpenter: 1 min multi-node, 3 min single-node); candidates not
	// reached are refused as such and the next pass tries again. Zero: no
	// limit (offline replays, tests).
	TimeLimit time.Duration
	// DefaultMaxPods is the cluster network's max pods default for classes
	// that set none (see scheduler.Input); 0 is v1beta1.DefaultMaxPods.
	DefaultMaxPods int32
}

// State is what a decision is made from.
type State struct {
	Cluster *snapshot.Cluster
	Catalog *catalog.Catalog
	// PoolCatalogs are NodePools' views of Catalog with their NodeOverlays
	// applied (scheduler.Input.PoolCatalogs): candidates are priced and
	// replacements chosen from them.
	PoolCatalogs map[string]*catalog.Catalog
	Now          time.Time
	Options      Options
	// Versions are the image and Kubernetes versions nodes should run
	// (zero: no version drift).
	Versions Versions
	// DriftHold says whether drift of a reason (a Drift* constant) may not
	// start now, and why (the cluster's maintenance windows). It is asked
	// only for drifted candidates, once per reason it needs. nil: drift may
	// start at any time.
	DriftHold func(reason string) (Hold, bool)
	// BufferPods are the CapacityBuffers' virtual pods (package
	// capacitybuffer): the room they hold is kept (see placeBuffers).
	BufferPods []*corev1.Pod
}

// Hold keeps drift replacements of one reason from starting now. The
// node stays a candidate for every other method: emptiness, consolidation
// and expiration are not held.
type Hold struct {
	// Reason completes "drifted (<why>) but ..." in the node's
	// explanation; it names the next window.
	Reason string
	// Until is when the hold may lift (the next window's start): the
	// decision's Next includes it, so a pass runs then. Zero: unknown.
	Until time.Time
}

// Candidate is a node that may be disrupted.
type Candidate struct {
	NodeClaim *karpv1.NodeClaim
	Node      *corev1.Node
	NodePool  *karpv1.NodePool
	// Pods must move elsewhere if the node goes (DaemonSet, mirror and
	// finished pods are not counted).
	Pods         []*corev1.Pod
	InstanceType string
	Zone         string
	CapacityType string
	// Price is the node's $/hour (0 if the catalog does not know it).
	Price float64
	// DisruptionCost is 1 plus each pod's eviction cost.
	DisruptionCost float64
	// Consolidatable: Initialized and consolidateAfter has passed since the
	// last pod event.
	Consolidatable bool
	// Drift is why the node no longer matches its NodePool or
	// AKSNodeClass ("" if it does).
	Drift string
	// DriftHeld is why its drift may not be acted on now ("" if it may):
	// State.DriftHold's reason, as the node's explanation.
	DriftHeld string
	// HoldsBuffer names the CapacityBuffers whose room the node holds
	// ("" if none): emptiness leaves it.
	HoldsBuffer string

	moved []*corev1.Pod // see unbound
}

// Name is the NodeClaim's name.
func (c *Candidate) Name() string { return c.NodeClaim.Name }

// Command is one disruption to carry out.
type Command struct {
	Reason     Reason
	Method     string
	Candidates []*Candidate
	// Replacements are the NodeClaims to launch (and see Initialized)
	// before the candidates go; none means delete.
	Replacements []*scheduler.NodeClaimPlan
	// Existing is where the simulation put the candidates' pods on nodes
	// that stay (copies of the pods, without nodeName).
	Existing []scheduler.Placement
	// Savings is $/hour saved (price of the candidates minus the
	// replacements' cheapest offerings).
	Savings float64
}

// Action is "delete" or "replace".
func (c *Command) Action() string {
	if len(c.Replacements) == 0 {
		return "delete"
	}
	return "replace"
}

func (c *Command) String() string {
	names := make([]string, len(c.Candidates))
	for i, cand := range c.Candidates {
		names[i] = cand.Name()
	}
	line := fmt.Sprintf("%s %s (%s): %s", c.Method, c.Action(), c.Reason, strings.Join(names, ", "))
	for _, replacement := range c.Replacements {
		it, off := replacement.Cheapest()
		if it != nil {
			line += fmt.Sprintf(" -> %s %s %s", it.Name, off.Zone, off.CapacityType)
		}
	}
	return line + fmt.Sprintf(", saves $%.4f/h", c.Savings)
}

// Refusal says why a node is left alone.
type Refusal struct {
	NodeClaim string
	// Blocked: a reason on the node itself (DisruptionBlocked);
	// otherwise consolidation found nothing better (Unconsolidatable).
	Blocked bool
	Reason  string
}

// Decision is the outcome of one decision pass.
type Decision struct {
	// Expired NodeClaims are deleted regardless of budgets.
	Expired []*karpv1.NodeClaim
	// Command is nil when nothing should be disrupted.
	Command *Command
	// Refusals name every managed node not in Command and why.
	Refusals []Refusal
	// Next is the earliest future time a NodeClaim becomes
	// consolidatable or expires (zero: none).
	Next time.Time
	// Budgets are what each NodePool allows per reason now.
	Budgets Budgets
	// BudgetErrors describe budgets that could not be read; their
	// NodePools are not disrupted (allowed 0).
	BudgetErrors []error
	// BufferRooms says where each CapacityBuffer's virtual pods go on the
	// cluster as it is, by namespace/name (nil: no buffers).
	BufferRooms map[string]*capacitybuffer.Room
}

// Method names: they go on the wire (validation messages, the annotations
// of a command's replacements, events, decision records and plan output), so
// they never change.
const (
	MethodEmptiness   = "emptiness"
	MethodStaticDrift = "static drift"
	MethodDrift       = "drift"
	MethodMultiNode   = "multi-node consolidation"
	MethodSingleNode  = "single-node consolidation"
	MethodRebalance   = "rebalancing consolidation"
)

// Method is one way of disrupting nodes.
type Method interface {
	// Name is the method's name in commands (Command.Method), one of the
	// Method* constants.
	Name() string
	// Reason is the budget reason the method spends.
	Reason() Reason
	// ShouldDisrupt says whether the method applies to c.
	ShouldDisrupt(candidate *Candidate) bool
	// ComputeCommands returns the commands the method would run, best
	// first, within budgets; refusals for candidates it considered.
	ComputeCommands(engine *Engine, budgets Budgets, candidates []*Candidate) ([]*Command, []Refusal)
}

// MethodNames are the names of every method, in decision order.
func MethodNames() []string {
	return []string{MethodEmptiness, MethodStaticDrift, MethodDrift, MethodMultiNode, MethodSingleNode, MethodRebalance}
}

// IsMethod: name is a method's name.
func IsMethod(name string) bool { return slices.Contains(MethodNames(), name) }

// MethodNamed is the method of a decision under o called name; nil when o
// does not run it (or no method is called so).
func MethodNamed(o Options, name string) Method {
	for _, method := range methodsFor(o) {
		if method.Name() == name {
			return method
		}
	}
	return nil
}

// Methods are Karpenter's, in its order.
func Methods() []Method {
	return []Method{Emptiness{}, StaticDrift{}, Drift{}, MultiNodeConsolidation{}, SingleNodeConsolidation{}}
}

// methodsFor are the methods a decision runs: Karpenter's, then
// RebalancingConsolidation when o.Rebalance is on.
func methodsFor(o Options) []Method {
	if o.Rebalance {
		return append(Methods(), RebalancingConsolidation{})
	}
	return Methods()
}

// Decide runs every method in order and returns the first command.
func Decide(st State) Decision {
	engine := NewEngine(st)
	decision := Decision{Expired: engine.Expired(), Next: engine.next, Budgets: engine.budgets, BudgetErrors: engine.budgetErrs,
		BufferRooms: engine.bufferRooms}
	refused := map[string]Refusal{}
	for name, refusal := range engine.blocked {
		refused[name] = refusal
	}
	// A held drift explains the node before whatever consolidation says:
	// it is why a drifted node is still there.
	for _, candidate := range engine.Candidates {
		if candidate.DriftHeld != "" {
			refused[candidate.Name()] = Refusal{NodeClaim: candidate.Name(), Blocked: true, Reason: candidate.DriftHeld}
		}
	}
	decision.Command = engine.firstCommand(refused)
	in := map[string]bool{}
	if decision.Command != nil {
		for _, candidate := range decision.Command.Candidates {
			in[candidate.Name()] = true
		}
	}
	for _, candidate := range engine.Candidates {
		if _, ok := refused[candidate.Name()]; !ok && !in[candidate.Name()] {
			refused[candidate.Name()] = Refusal{NodeClaim: candidate.Name(), Reason: engine.idleReason(candidate)}
		}
		// An empty node left for the room it holds says so, whatever
		// consolidation said: emptiness would have taken it.
		if !in[candidate.Name()] && candidate.Consolidatable && len(candidate.Pods) == 0 && candidate.HoldsBuffer != "" {
			refused[candidate.Name()] = Refusal{NodeClaim: candidate.Name(), Blocked: true,
				Reason: "empty, but it holds the room of CapacityBuffer " + candidate.HoldsBuffer + "; no cheaper node keeps that room"}
		}
	}
	for name, refusal := range refused {
		if !in[name] {
			decision.Refusals = append(decision.Refusals, refusal)
		}
	}
	sort.Slice(decision.Refusals, func(i, j int) bool { return decision.Refusals[i].NodeClaim < decision.Refusals[j].NodeClaim })
	return decision
}

// firstCommand runs the methods in order until one has a command; every
// method's first refusal of a node is added to refused.
func (e *Engine) firstCommand(refused map[string]Refusal) *Command {
	for _, method := range methodsFor(e.st.Options) {
		var eligible []*Candidate
		for _, candidate := range e.Candidates {
			if method.ShouldDisrupt(candidate) {
				eligible = append(eligible, candidate)
			}
		}
		if len(eligible) == 0 {
			continue
		}
		cmds, refusals := method.ComputeCommands(e, e.budgets, eligible)
		for _, refusal := range refusals {
			if _, ok := refused[refusal.NodeClaim]; !ok {
				refused[refusal.NodeClaim] = refusal
			}
		}
		if len(cmds) > 0 {
			return cmds[0]
		}
	}
	return nil
}

// idleReason explains a candidate no method took.
func (e *Engine) idleReason(c *Candidate) string {
	switch {
	case !c.Consolidatable && c.Drift == "":
		return e.notConsolidatableWhy(c)
	case c.NodePool.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty && len(c.Pods) > 0 && c.Drift == "":
		return "consolidationPolicy WhenEmpty and the node has pods"
	case e.pending > 0:
		return fmt.Sprintf("%d pods are pending: consolidation and drift wait until provisioning has placed them", e.pending)
	default:
		return "no cheaper placement for its pods"
	}
}
