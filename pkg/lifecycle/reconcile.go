package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Result says what one reconcile of a NodeClaim did.
type Result struct {
	NodeClaim   string
	Launched    bool      // the NodeClaim is Launched (by this call or before)
	Registered  bool      // registered by this call
	Initialized bool      // initialized by this call
	RequeueAt   time.Time // when the next launch check is due; zero: none
	GaveUp      bool      // the launch gave the NodeClaim up (deleted it)
	Marked      []string  // offerings the launch marked unavailable, described
	// Outcome holds that launch check (triggers.LaunchCheck) and what else
	// the launch asks for (the liveness check of a launched NodeClaim, a
	// provisioning pass after a give-up) for the caller to send: the
	// controller does not publish.
	Outcome triggers.Outcome
}

// claim is what the reconcilers of one NodeClaim share in one call.
type claim struct {
	nc   *karpv1.NodeClaim
	node *corev1.Node // nil until a reconciler found it
	res  Result
}

// step is one reconciler's answer: whether its condition holds (so the
// next reconciler may run) and when to look again (zero: no need).
type step struct {
	done      bool
	requeueAt time.Time
}

type reconciler func(ctx context.Context, cl *claim) (step, error)

// reconcile runs a NodeClaim's reconcilers in order — launch (launch.go),
// registration, initialization — each only once the one before holds, and
// asks for the earliest look any of them asked for in the result's Outcome:
// the one place launch checks are asked for.
func (c *Controller) reconcile(ctx context.Context, cl *claim) (Result, error) {
	var err error
	for _, sub := range []reconciler{c.reconcileLaunch, c.reconcileRegistration, c.reconcileInitialization} {
		var answer step
		answer, err = sub(ctx, cl)
		if !answer.requeueAt.IsZero() && (cl.res.RequeueAt.IsZero() || answer.requeueAt.Before(cl.res.RequeueAt)) {
			cl.res.RequeueAt = answer.requeueAt
		}
		if err != nil || !answer.done {
			break
		}
	}
	if !cl.res.RequeueAt.IsZero() {
		cl.res.Outcome.Then(triggers.LaunchCheck(c.cluster, cl.nc.Name, string(cl.nc.UID), cl.res.RequeueAt))
	}
	return cl.res, err
}

func (c *Controller) reconcileLaunch(ctx context.Context, cl *claim) (step, error) {
	launched := func() bool {
		return cl.nc.DeletionTimestamp == nil && cl.nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue()
	}
	if launched() || c.launch == nil {
		cl.res.Launched = launched()
		return step{done: cl.res.Launched}, nil
	}
	res, err := c.launch.reconcile(ctx, cl.nc, cl.node != nil)
	cl.res.Launched = launched()
	cl.res.GaveUp, cl.res.Marked = res.GaveUp, res.Marked
	cl.res.Outcome.Then(res.Continuations...)
	return step{done: cl.res.Launched, requeueAt: res.RequeueAt}, err
}

func (c *Controller) reconcileRegistration(ctx context.Context, cl *claim) (step, error) {
	if cl.nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		return step{done: true}, nil
	}
	if err := c.findNode(ctx, cl); err != nil || cl.node == nil {
		return step{}, err
	}
	nc, node, registered, err := c.register(ctx, cl.nc, cl.node)
	cl.nc, cl.node, cl.res.Registered = nc, node, registered
	if err != nil {
		return step{}, err
	}
	return step{done: cl.nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue()}, nil
}

func (c *Controller) reconcileInitialization(ctx context.Context, cl *claim) (step, error) {
	if cl.nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		return step{done: true}, nil
	}
	if err := c.findNode(ctx, cl); err != nil || cl.node == nil {
		return step{}, err
	}
	ok, err := c.initialize(ctx, cl.nc, cl.node)
	cl.res.Initialized = ok
	return step{done: ok}, err
}

// findNode sets cl.node to the launched NodeClaim's Node, if it joined: the
// Node it registered as, or else the Node named like the NodeClaim (the
// VM's computer name) with its providerID. One GET, no listing.
func (c *Controller) findNode(ctx context.Context, cl *claim) error {
	nc := cl.nc
	if cl.node != nil || nc.Status.ProviderID == "" {
		return nil
	}
	name := nc.Status.NodeName
	if name == "" {
		name = nc.Name
	}
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	if strings.EqualFold(node.Spec.ProviderID, nc.Status.ProviderID) {
		cl.node = node
	}
	return nil
}

// Check is the scheduled launch check of NodeClaim name: it reconciles the
// NodeClaim (launch, then registration and initialization if its Node
// already joined) and asks for the next check (Result.Outcome) if the launch still runs.
// uid guards against a NodeClaim deleted and created again under the name.
func (c *Controller) Check(ctx context.Context, name, uid string) (Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return Result{}, nil
		}
		return Result{}, fmt.Errorf("reading NodeClaim %s: %w", name, err)
	}
	if (uid != "" && string(nc.UID) != uid) || nc.DeletionTimestamp != nil {
		return Result{NodeClaim: name}, nil
	}
	return c.reconcile(ctx, &claim{nc: nc, res: Result{NodeClaim: name}})
}
