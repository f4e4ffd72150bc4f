package repair

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Event reasons. ReasonRepairBlocked is Karpenter's
// (pkg/events/reason.go); ReasonUnhealthy, on the Node and the NodeClaim
// when the repair starts, is karpfunc's (Karpenter only logs "deleting
// unhealthy node").
const (
	ReasonRepairBlocked = "NodeRepairBlocked"
	ReasonUnhealthy     = lifecycle.ReasonUnhealthy
)

// Evacuator runs a provisioning pass in which the named nodes are leaving;
// *provisioning.Provisioner implements it.
type Evacuator interface {
	Evacuate(ctx context.Context, nodes ...string) (provisioning.Result, error)
}

// Options configure a Controller.
type Options struct {
	Kube      client.Client
	Lifecycle *lifecycle.Controller
	Evacuator Evacuator
	// Policies default to Policies(0), the Azure provider's.
	Policies    []Policy
	ClusterName string
	Clock       clock.Clock
	Logger      *slog.Logger
}

// Controller repairs unhealthy nodes; it holds no state between calls.
type Controller struct {
	kube     client.Client
	lc       *lifecycle.Controller
	evac     Evacuator
	policies []Policy
	cluster  string
	clock    clock.Clock
	log      *slog.Logger
	recorder *events.Recorder
}

// New returns a Controller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Policies == nil {
		opts.Policies = Policies(0)
	}
	return &Controller{kube: opts.Kube, lc: opts.Lifecycle, evac: opts.Evacuator, policies: opts.Policies, cluster: opts.ClusterName,
		clock: opts.Clock, log: opts.Logger, recorder: events.NewRecorder(opts.Kube, opts.Clock)}
}

// Result says what Check found and did.
type Result struct {
	Node, NodeClaim, NodePool string
	// Skipped says why the node was not looked at ("" when it was): gone,
	// not karpfunc's, already terminating.
	Skipped  string
	Decision Decision
	// Replacements are the NodeClaims the repair's provisioning pass
	// created.
	Replacements []string
	// Outcome holds the next look (a Wait or a Blocked) and what the
	// replacement's pass and the termination ask for.
	Outcome triggers.Outcome
}

// Check looks at node name: healthy, waiting for its toleration (the
// next look is scheduled for when it ends), blocked by the NodePool's
// unhealthy share (looked at again after BlockedRecheck), or repaired
// now: its node tainted, the replacement provisioned, then its NodeClaim
// marked for forced termination and deleted.
func (c *Controller) Check(ctx context.Context, name string) (Result, error) {
	res := Result{Node: name}
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			res.Skipped = "the node is gone"
			return res, nil
		}
		return res, fmt.Errorf("reading node %s: %w", name, err)
	}
	if _, bad := Find(node, c.policies); !bad {
		res.Decision = Decision{Action: Healthy}
		return res, nil
	}
	nc, err := c.lc.NodeClaimForProviderID(ctx, node.Spec.ProviderID)
	switch {
	case err != nil:
		return res, err
	case nc == nil || !ownership.Owns(nc):
		res.Skipped = "no karpfunc NodeClaim for the node"
		return res, nil
	case nc.DeletionTimestamp != nil:
		res.Skipped = fmt.Sprintf("NodeClaim %s is terminating", nc.Name)
		return res, nil
	}
	res.NodeClaim, res.NodePool = nc.Name, nc.Labels[karpv1.NodePoolLabelKey]
	now := c.clock.Now()
	var pool []*corev1.Node
	if u, _ := Find(node, c.policies); !now.Before(u.Due) {
		if pool, err = c.poolNodes(ctx, res.NodePool); err != nil {
			return res, err
		}
	}
	res.Decision = Decide(node, pool, c.policies, now)
	ref := messages.Node{Cluster: c.cluster, Name: node.Name, UID: string(node.UID), ProviderID: node.Spec.ProviderID}
	switch res.Decision.Action {
	case Wait:
		res.Outcome.Then(triggers.RepairCheck(ref, checkAt(res.Decision.Unhealthy.Due)))
	case Blocked:
		c.blocked(ctx, node, nc, res)
		res.Outcome.Then(triggers.RepairCheck(ref, triggers.Due(now, BlockedRecheck)))
	case Repair:
		return res, c.repair(ctx, node, nc, &res)
	}
	return res, nil
}

// checkAt is when the look at a node due at due is delivered: the next
// whole second after due. Never before due, so the look finds the
// toleration over; a look that found it not over would ask for a message
// with its own ID, which duplicate detection drops.
func checkAt(due time.Time) time.Time { return due.Truncate(time.Second).Add(time.Second) }

// poolNodes are the nodes of NodePool pool, or every node for a
// NodeClaim of no NodePool (Karpenter's isClusterHealthy).
func (c *Controller) poolNodes(ctx context.Context, pool string) ([]*corev1.Node, error) {
	var list corev1.NodeList
	var opts []client.ListOption
	if pool != "" {
		opts = append(opts, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	}
	if err := c.kube.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing the nodes of NodePool %q: %w", pool, err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// blocked reports a repair the pool's unhealthy share holds off: a
// NodeRepairBlocked event on the node (one per 15 minutes, as Karpenter
// dedupes it) and the NodePool's NodeRepairBlocked condition.
func (c *Controller) blocked(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, res Result) {
	d := res.Decision
	scope := "NodePool " + res.NodePool
	if res.NodePool == "" {
		scope = "the cluster"
	}
	msg := fmt.Sprintf("node %s is unhealthy (%s) past its toleration, but %d of the %d nodes of %s are unhealthy, more than %d%% (%d): no node is repaired until enough recover",
		node.Name, d.Unhealthy, d.PoolUnhealthy, d.PoolNodes, scope, AllowedUnhealthyPercent, d.Allowed)
	c.log.Warn("node repair blocked", "node", node.Name, "nodeclaim", nc.Name, "nodepool", res.NodePool, "unhealthy", d.PoolUnhealthy, "nodes", d.PoolNodes)
	for _, obj := range []client.Object{node, nc} {
		c.event(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: ReasonRepairBlocked, Message: msg,
			DedupeValues: []string{string(obj.GetUID())}, DedupeTimeout: 15 * time.Minute})
	}
	if res.NodePool == "" {
		return
	}
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: res.NodePool}, np); err != nil {
		c.log.Warn("reading nodepool for its NodeRepairBlocked condition", "nodepool", res.NodePool, "error", err)
		return
	}
	c.event(ctx, events.Event{Object: np, Type: corev1.EventTypeWarning, Reason: ReasonRepairBlocked, Message: msg,
		DedupeValues: []string{string(np.UID)}, DedupeTimeout: 15 * time.Minute})
	if err := nodepoolstatus.SetRepairBlocked(ctx, c.kube, np, true, msg, c.clock); err != nil {
		c.log.Warn("writing NodeRepairBlocked", "nodepool", np.Name, "error", err)
	}
}

// repair replaces node: taint it, run a provisioning pass in which it is
// leaving (the replacement's launch begins), then mark its NodeClaim for
// forced termination, delete it and ask for the termination.
func (c *Controller) repair(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, res *Result) error {
	u := res.Decision.Unhealthy
	why := fmt.Sprintf("node %s is unhealthy: %s, tolerated for %s", node.Name, u, u.Toleration)
	if _, err := c.lc.TaintDisrupted(ctx, node); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("tainting unhealthy node %s: %w", node.Name, err)
	}
	pr, err := c.evac.Evacuate(ctx, node.Name)
	res.Replacements = append(res.Replacements, pr.Created...)
	for _, s := range pr.Static {
		for _, name := range s.Created {
			if !slices.Contains(res.Replacements, name) {
				res.Replacements = append(res.Replacements, name)
			}
		}
	}
	res.Outcome.Then(pr.Outcome.Continuations...)
	if err != nil {
		return fmt.Errorf("provisioning the replacement of unhealthy node %s: %w", node.Name, err)
	}
	nc, err = c.lc.MarkUnhealthy(ctx, nc, why)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeClaim %s of unhealthy node %s: %w", nc.Name, node.Name, err)
	}
	c.log.Info("deleting unhealthy node", "node", node.Name, "nodeclaim", nc.Name, "nodepool", res.NodePool, "condition", u.String(),
		"replacements", res.Replacements)
	recordRepaired(ctx, nc, u.Condition.Type)
	msg := fmt.Sprintf("%s; replacing it (replacements %v) and terminating NodeClaim %s at once", why, res.Replacements, nc.Name)
	for _, obj := range []client.Object{node, nc} {
		c.event(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: ReasonUnhealthy, Message: msg})
	}
	if res.NodePool != "" {
		np := &karpv1.NodePool{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: res.NodePool}, np); err == nil {
			if err := nodepoolstatus.SetRepairBlocked(ctx, c.kube, np, false, "", c.clock); err != nil {
				c.log.Warn("clearing NodeRepairBlocked", "nodepool", np.Name, "error", err)
			}
		}
	}
	term, err := c.lc.RequestTerminate(ctx, nc)
	res.Outcome.Then(term.Continuations...)
	if err != nil {
		return fmt.Errorf("requesting the termination of NodeClaim %s: %w", nc.Name, err)
	}
	return nil
}

func (c *Controller) event(ctx context.Context, ev events.Event) {
	if err := c.recorder.Publish(ctx, ev); err != nil {
		c.log.Warn("writing event", "reason", ev.Reason, "error", err)
	}
}
