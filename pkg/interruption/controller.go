package interruption

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
	"github.com/karpfunc/karpfunc/pkg/triggers"
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
	// Offerings is the shared unavailable-offerings state; nil: nothing is
	// marked.
	Offerings *offerings.Store
	// UnavailableTTL is how long an interrupted spot offering stays
	// unavailable (default offerings.DefaultTTL, Karpenter's 3 minutes).
	UnavailableTTL time.Duration
	Clock          clock.Clock
	Logger         *slog.Logger
	// ClusterName and Decisions record each interruption (default: logged
	// with Logger, published nowhere).
	ClusterName string
	Decisions   *decisions.Recorder
}

// Controller handles interruption signals.
type Controller struct {
	kube     client.Client
	lc       *lifecycle.Controller
	evac     Evacuator
	offer    *offerings.Store
	ttl      time.Duration
	clock    clock.Clock
	log      *slog.Logger
	recorder *events.Recorder

	cluster   string
	decisions *decisions.Recorder
}

// New returns a Controller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UnavailableTTL <= 0 {
		opts.UnavailableTTL = offerings.DefaultTTL
	}
	if opts.Decisions == nil {
		opts.Decisions = decisions.NewRecorder(opts.Logger)
	}
	return &Controller{cluster: opts.ClusterName, decisions: opts.Decisions, kube: opts.Kube, lc: opts.Lifecycle, evac: opts.Evacuator, offer: opts.Offerings,
		ttl: opts.UnavailableTTL, clock: opts.Clock, log: opts.Logger, recorder: events.NewRecorder(opts.Kube, opts.Clock)}
}

// Result says what Interrupt did.
type Result struct {
	// NotOurs is set (with the reason) when no NodeClaim matches the
	// signal: another workload's VM, or one already terminated.
	NotOurs   string
	NodeClaim string
	Node      string
	// First: this signal started the interruption; a duplicate (the other
	// signal, a redelivery, the other schema) finds it started.
	First    bool
	Deadline time.Time
	// Marked is the offering marked unavailable.
	Marked string
	// Replacements are the NodeClaims the evacuation pass created;
	// Placed counts the pods it placed on capacity already there or on
	// its way.
	Replacements []string
	Placed       int
	// Outcome holds the continuations the evacuation asks for (the
	// replacements' launch checks, a next pass), for the caller to send.
	Outcome triggers.Outcome
}

// Interrupt acts on one signal: mark the spot offering unavailable, taint
// the node, provision the replacement for its pods, record the deadline on
// the NodeClaim, delete the NodeClaim and have the Lifecycle function drain
// it against the deadline at once. Every step is idempotent; the first
// signal does them all, a duplicate finds the NodeClaim interrupted and
// only brings the deadline closer (a VM that is already gone ends the drain
// at once) and asks for the termination again (collapsed by duplicate
// detection while the first request is remembered).
func (c *Controller) Interrupt(ctx context.Context, sig Signal) (Result, error) {
	var res Result
	nc, err := c.nodeClaimFor(ctx, sig)
	if err != nil {
		return res, err
	}
	if nc == nil {
		res.NotOurs = fmt.Sprintf("no NodeClaim for %s: not a karpfunc node, or already terminated", sig.Target())
		return res, nil
	}
	res.NodeClaim = nc.Name
	now := c.clock.Now()
	deadline := signalDeadline(sig, now)
	_, was := lifecycle.InterruptionDeadline(nc)
	node, err := c.lc.NodeOf(ctx, nc)
	if err != nil {
		return res, err
	}
	res.Node = nc.Status.NodeName
	if node != nil {
		res.Node = node.Name
	}
	if !was {
		if err := c.replace(ctx, nc, node, now, &res); err != nil {
			return res, err
		}
	}
	nc, first, err := c.lc.MarkInterrupted(ctx, nc, deadline, sig.Detail)
	if apierrors.IsNotFound(err) {
		res.NotOurs = fmt.Sprintf("NodeClaim %s finished terminating meanwhile", res.NodeClaim)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	res.First = first
	c.recordNotice(ctx, sig, nc, res)
	res.Deadline, _ = lifecycle.InterruptionDeadline(nc)
	if first {
		c.announce(ctx, sig, nc, node, res.Deadline, deadline.Sub(now))
	}
	terminate, err := c.terminate(ctx, nc)
	res.Outcome.Then(terminate.Continuations...)
	return res, err
}

// signalDeadline is when the signal's node must be gone: its deadline, or
// now when it carries none or the VM is already gone.
func signalDeadline(sig Signal, now time.Time) time.Time {
	deadline := sig.Deadline
	if deadline.IsZero() || (sig.Gone && deadline.After(now)) {
		deadline = now
	}
	return deadline
}

// replace acts on the first signal for a NodeClaim: mark its spot offering
// unavailable, taint its node (nil when none) and provision the
// replacement for its pods, recording both in res.
func (c *Controller) replace(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, now time.Time, res *Result) error {
	var err error
	if res.Marked, err = c.markOffering(ctx, nc, now); err != nil {
		return err
	}
	if node != nil {
		if _, err := c.lc.TaintDisrupted(ctx, node); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	var nodes []string
	if res.Node != "" {
		nodes = append(nodes, res.Node)
	}
	pr, err := c.evac.Evacuate(ctx, nodes...)
	res.Replacements = pr.Created
	res.Outcome.Then(pr.Outcome.Continuations...)
	res.Placed = pr.Pods.Count(provisioning.OnNode) + pr.Pods.Count(provisioning.OnInFlight)
	if err != nil {
		return fmt.Errorf("provisioning the replacement for NodeClaim %s: %w", nc.Name, err)
	}
	return nil
}

// announce records events on the NodeClaim and its node (nil when none)
// that the node must be gone by deadline; notice is how much notice the
// signal gave.
func (c *Controller) announce(ctx context.Context, sig Signal, nc *karpv1.NodeClaim, node *corev1.Node, deadline time.Time, notice time.Duration) {
	msg := fmt.Sprintf("%s; node must be gone by %s", sig.Detail, deadline.Format(time.RFC3339))
	if sig.DeadlineAssumed {
		msg += fmt.Sprintf(" (the notice carried no deadline: assumed %s of notice)", notice.Round(time.Second))
	}
	c.event(ctx, nc, msg)
	if node != nil {
		c.event(ctx, node, msg)
	}
}

// terminate deletes the interrupted NodeClaim and asks the Lifecycle
// function to drain it. The drain runs there, at once: one Terminate chain
// however many signals arrive (see RequestTerminate).
func (c *Controller) terminate(ctx context.Context, nc *karpv1.NodeClaim) (triggers.Outcome, error) {
	if nc.DeletionTimestamp == nil {
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return triggers.Outcome{}, fmt.Errorf("deleting interrupted NodeClaim %s: %w", nc.Name, err)
		}
	}
	out, err := c.lc.RequestTerminate(ctx, nc)
	if err != nil {
		return out, fmt.Errorf("requesting the termination of interrupted NodeClaim %s: %w", nc.Name, err)
	}
	return out, nil
}

// nodeClaimFor finds the NodeClaim a signal is about: by its Node's name
// (status.nodeName), else by the VM's providerID.
func (c *Controller) nodeClaimFor(ctx context.Context, sig Signal) (*karpv1.NodeClaim, error) {
	if sig.Node != "" {
		var list karpv1.NodeClaimList
		if err := c.kube.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing nodeclaims: %w", err)
		}
		for i := range list.Items {
			if list.Items[i].Status.NodeName == sig.Node {
				return &list.Items[i], nil
			}
		}
	}
	if sig.ProviderID != "" {
		return c.lc.NodeClaimForProviderID(ctx, sig.ProviderID)
	}
	return nil, nil
}

// markOffering records the spot offering (size, zone) the VM ran on as
// unavailable for the TTL, so the replacement and the next launches go
// elsewhere. On-demand capacity is not marked: it is not preempted.
func (c *Controller) markOffering(ctx context.Context, nc *karpv1.NodeClaim, now time.Time) (string, error) {
	if c.offer == nil || nc.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot {
		return "", nil
	}
	entry := offerings.Entry{CapacityType: karpv1.CapacityTypeSpot, InstanceType: nc.Labels[corev1.LabelInstanceTypeStable],
		Zone: nc.Labels[corev1.LabelTopologyZone], Reason: lifecycle.ReasonSpotInterrupted, Until: now.Add(c.ttl)}
	if entry.InstanceType == "" {
		return "", nil // never launched: no offering to blame
	}
	if err := c.offer.Mark(ctx, entry); err != nil {
		return "", fmt.Errorf("marking %s unavailable: %w", entry, err)
	}
	return entry.String(), nil
}

func (c *Controller) event(ctx context.Context, obj client.Object, msg string) {
	if err := c.recorder.Publish(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: lifecycle.ReasonSpotInterrupted, Message: msg}); err != nil {
		c.log.Warn("writing event", "error", err)
	}
}
