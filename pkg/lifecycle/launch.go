package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/gpu"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// The launch is the first of a NodeClaim's reconcilers, as in Karpenter's
// nodeclaim lifecycle: it creates the NodeClaim's instance through the
// provider contract (cloudprovider.Creator), never waiting for Azure, and
// writes Launched. Its state lives on the NodeClaim (launchState), so any
// invocation takes the launch up where the last one left it.

// Launch timing. A create is looked at after LaunchCheckInterval, then at
// doubling intervals up to four times that; a NIC still being created and a
// failed VM being deleted are looked at sooner.
const (
	DefaultLaunchCheckInterval = 5 * time.Second
	nicCheck                   = time.Second
	replaceCheck               = 2 * time.Second
	// checkSlack: a check this early is still the one that is due.
	checkSlack = time.Second
	// stalledLaunch: a launch whose check is this overdue lost its
	// scheduled message; the next Provision pass asks for a check again.
	stalledLaunch = time.Minute
	// provisionRetry is how soon a provisioning pass runs after a
	// NodeClaim is given up: its pods are pending again.
	provisionRetry = 2 * time.Second
)

// LaunchTimeout bounds a whole launch, every offering tried included: a
// NodeClaim whose VM is still not created then is given up (ARM's own
// create timeouts are far longer than a pending pod should wait).
const LaunchTimeout = 15 * time.Minute

// DefaultMaxLaunchFailures is how many times one offering's launch may
// fail for a reason other than capacity before the offering is excluded
// and the NodeClaim given up.
const DefaultMaxLaunchFailures = 3

// DefaultMaxLaunchAttempts is how many offerings one launch tries, in price
// order, before it gives the NodeClaim up as InsufficientCapacity.
const DefaultMaxLaunchAttempts = 3

// NodeClassGroup and NodeClassKind are the nodeClassRef every NodeClaim
// (and so every NodePool) must use.
const (
	NodeClassGroup = v1beta1.Group
	NodeClassKind  = "AKSNodeClass"
)

// LaunchOptions configure the launch reconciler.
type LaunchOptions struct {
	// Creator begins instance creates and reads their state (required).
	Creator cloudprovider.Creator
	// Catalog is what the offering is chosen from (required).
	Catalog *catalog.Catalog
	// Offerings is the shared unavailable-offerings state; nil disables it
	// (every offering the catalog calls available is tried).
	Offerings *offerings.Store
	// Overlays are the NodeOverlays the offering is chosen with, as the
	// Azure provider applies them at launch (pkg/cloudprovider/
	// cloudprovider.go:573-585 @352646f5); nil: catalog prices.
	Overlays *nodeoverlay.Source
	// MaxAttempts (default DefaultMaxLaunchAttempts).
	MaxAttempts int
	// MaxFailures (default DefaultMaxLaunchFailures).
	MaxFailures int
	// CheckInterval is the first wait before a running VM create is
	// looked at again (default DefaultLaunchCheckInterval).
	CheckInterval time.Duration
	// Decisions records launches and give-ups (default: logged, published
	// nowhere).
	Decisions *decisions.Recorder
	// DefaultMaxPods is the cluster network's max pods default for classes
	// that set none (the same number the scheduler planned with); 0 is
	// v1beta1.DefaultMaxPods.
	DefaultMaxPods int32
}

// LaunchResult says where one look at a NodeClaim's launch left it.
type LaunchResult struct {
	Launched bool // Launched=True, by this look or before
	// GaveUp: the NodeClaim was deleted (no offering left, or its launch
	// cannot succeed); its pods are provisioned again.
	GaveUp bool
	// RequeueAt is when to look again; zero when nothing is left to look at.
	RequeueAt time.Time
	Marked    []string // offerings marked unavailable, described
	// Continuations the look asks for besides the next check: the
	// liveness check of a launched NodeClaim, the provisioning pass after
	// a give-up.
	Continuations []triggers.Continuation
}

// launcher is the launch reconciler.
type launcher struct {
	kube          client.Client
	creator       cloudprovider.Creator
	catalog       *catalog.Catalog
	offerings     *offerings.Store
	overlays      *nodeoverlay.Source
	clock         clock.Clock
	log           *slog.Logger
	recorder      *events.Recorder
	cluster       string
	regTTL        time.Duration
	maxAttempts   int
	maxFailures   int
	checkInterval time.Duration
	decisions     *decisions.Recorder
	maxPods       int32
}

// newLauncher returns the launch reconciler, nil without a Creator.
func newLauncher(opts Options) *launcher {
	launch := opts.Launch
	if launch == nil || launch.Creator == nil {
		return nil
	}
	cfg := *launch
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxLaunchAttempts
	}
	if cfg.MaxFailures <= 0 {
		cfg.MaxFailures = DefaultMaxLaunchFailures
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultLaunchCheckInterval
	}
	if cfg.Decisions == nil {
		cfg.Decisions = decisions.NewRecorder(opts.Logger)
	}
	return &launcher{kube: opts.Kube, creator: cfg.Creator, catalog: cfg.Catalog, offerings: cfg.Offerings, overlays: cfg.Overlays, clock: opts.Clock,
		log: opts.Logger, recorder: events.NewRecorder(opts.Kube, opts.Clock), cluster: opts.ClusterName, regTTL: opts.RegistrationTTL,
		maxAttempts: cfg.MaxAttempts, maxFailures: cfg.MaxFailures, checkInterval: cfg.CheckInterval, decisions: cfg.Decisions,
		maxPods: cfg.DefaultMaxPods}
}

// LaunchAsk is the launch check a Provision pass asks for nc, due now, and
// whether one is needed: none once a state records a check still due. A
// launch with no state yet gets the first check (triggers.FirstLaunchCheck),
// one message however many passes ask while the NodeClaim is young; one
// older than stalledLaunch with no state, or whose check is that overdue,
// lost its message and gets a check of its own.
func LaunchAsk(cluster string, nc *karpv1.NodeClaim, now time.Time) (triggers.Continuation, bool) {
	state := launchStateOf(nc)
	switch {
	case state == nil && now.Before(nc.CreationTimestamp.Add(stalledLaunch)):
		return triggers.FirstLaunchCheck(cluster, nc.Name, string(nc.UID), now), true
	case state == nil || now.After(state.NextCheck.Add(stalledLaunch)):
		return triggers.LaunchCheck(cluster, nc.Name, string(nc.UID), now), true
	}
	return triggers.Continuation{}, false
}

// reconcile moves nc's launch on by one step and says when to look at it
// again (zero: launched, given up, or not ours to launch). It never waits
// for Azure: it begins the NIC and the VM create, and later looks read the
// VM. Succeeded: nc is Launched, with the VM's providerID, capacity and
// allocatable (nc is updated in place). Failed: the error is classified; a
// capacity or quota error marks the offering unavailable and the next
// offering is created, any other error is written as Launched=False with
// ARM's code and retried until MaxFailures, then the offering is excluded
// and the NodeClaim given up; either way, after MaxAttempts offerings or
// with none left, nc is deleted and a provisioning pass asked for. An error
// reading the VM (throttling, 5xx) is no verdict: the create may be
// running, so nothing is deleted and the look is repeated.
//
// nodeJoined says a Node with the NodeClaim's name joined: the VM is then
// looked at right away, not when the next check is due.
func (lr *launcher) reconcile(ctx context.Context, nc *karpv1.NodeClaim, nodeJoined bool) (LaunchResult, error) {
	if nc.DeletionTimestamp != nil {
		return LaunchResult{}, nil
	}
	if nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		return LaunchResult{Launched: true}, nil
	}
	set, err := lr.loadUnavailable(ctx)
	if err != nil {
		return LaunchResult{}, err
	}
	cat, err := lr.poolCatalog(ctx, nc)
	if err != nil {
		return LaunchResult{}, err
	}
	look := &launch{lr: lr, nc: nc, state: launchStateOf(nc), set: set, cat: cat, now: lr.clock.Now()}
	res, err := look.run(ctx, nodeJoined)
	if res.GaveUp {
		res.Continuations = append(res.Continuations, triggers.ProvisionPass(lr.cluster, "", look.now, provisionRetry))
	}
	return res, err
}

// launch is one reconcile of one NodeClaim's launch.
type launch struct {
	lr    *launcher
	nc    *karpv1.NodeClaim
	spec  v1beta1.AKSNodeClassSpec
	state *launchState
	set   *offerings.Set
	// cat is the catalog as the NodeClaim's NodePool sees it: its
	// NodeOverlays applied, the same prices and capacities it was planned
	// with.
	cat *catalog.Catalog
	res LaunchResult
	now time.Time
}

func (l *launch) run(ctx context.Context, nodeJoined bool) (LaunchResult, error) {
	if l.state != nil && !nodeJoined && l.now.Before(l.state.NextCheck.Add(-checkSlack)) {
		// A look is already due then (this is a duplicate, or a second
		// chain of checks): leave the work to it.
		return LaunchResult{RequeueAt: l.state.NextCheck}, nil
	}
	class, err := NodeClassOf(ctx, l.lr.kube, l.nc)
	if err != nil {
		return LaunchResult{}, err
	}
	l.spec = class.DefaultedSpecFor(l.lr.maxPods)
	if l.state != nil && l.now.Sub(l.state.Begun) > LaunchTimeout {
		return l.giveUp(ctx, NewLaunchFailedError(l.nc.Name, "LaunchTimeout",
			fmt.Sprintf("VM %s did not finish creating within %s of the launch's first create", l.state, LaunchTimeout)))
	}
	inst, err := l.lr.creator.Status(ctx, l.nc.Name)
	switch {
	case cloudprovider.IsNodeClaimNotFound(err):
		return l.begin(ctx)
	case err != nil:
		return l.retryLater(ctx, err)
	}
	if l.state != nil && l.state.Phase == phaseReplacing {
		if res, waiting, err := l.awaitReplaced(ctx, inst); waiting || err != nil {
			return res, err
		}
	}
	if l.state == nil || !l.state.describes(inst) {
		l.adopt(inst)
	}
	return l.follow(ctx, inst)
}

// awaitReplaced: the failed VM is on its way out; the next create waits
// for it (waiting true) until the VM is gone or a new create runs.
func (l *launch) awaitReplaced(ctx context.Context, inst *cloudprovider.Instance) (LaunchResult, bool, error) {
	if strings.EqualFold(inst.State, cloudprovider.StateFailed) {
		if err := l.lr.creator.BeginDelete(ctx, l.nc.Name); err != nil {
			res, err := l.retryLater(ctx, err)
			return res, true, err
		}
	}
	if !strings.EqualFold(inst.State, cloudprovider.StateSucceeded) && !strings.EqualFold(inst.State, cloudprovider.StateCreating) {
		res, err := l.requeue(ctx, replaceCheck)
		return res, true, err
	}
	return LaunchResult{}, false, nil
}

// follow acts on the state of the VM of the current offering.
func (l *launch) follow(ctx context.Context, inst *cloudprovider.Instance) (LaunchResult, error) {
	switch {
	case strings.EqualFold(inst.State, cloudprovider.StateSucceeded):
		return l.launched(ctx, inst)
	case strings.EqualFold(inst.State, cloudprovider.StateFailed):
		return l.createFailed(ctx, inst)
	case strings.EqualFold(inst.State, cloudprovider.StateDeleting):
		return l.requeue(ctx, replaceCheck)
	default:
		return l.requeue(ctx, l.backoff())
	}
}

// adopt makes the state describe the VM that exists: one an interrupted
// invocation created before it could record it, or an earlier offering.
func (l *launch) adopt(inst *cloudprovider.Instance) {
	if l.state == nil {
		begun := inst.CreatedAt
		if begun.IsZero() || begun.After(l.now) {
			begun = l.now
		}
		l.state = &launchState{Begun: begun, Attempt: 1}
	}
	l.state.InstanceType, l.state.Zone, l.state.CapacityType = inst.InstanceType, inst.Zone, inst.CapacityType
	l.state.Phase = phaseVM
}

// begin starts the create of the current offering (choosing one first when
// there is none): the NIC, then, once the NIC is Succeeded, the VM. An
// offering ARM refuses synchronously for capacity is marked and the next
// one begun in the same call.
func (l *launch) begin(ctx context.Context) (LaunchResult, error) {
	if l.state == nil {
		l.state = &launchState{Begun: l.now}
	}
	for {
		if !l.state.hasOffering() {
			if res, gaveUp, err := l.chooseOffering(ctx); gaveUp {
				return res, err
			}
		}
		choice, err := l.lr.choice(l.cat, l.state, *l.spec.MaxPods)
		if err != nil {
			return l.giveUp(ctx, NewLaunchFailedError(l.nc.Name, "InstanceTypeUnknown", err.Error()))
		}
		res, done, err := l.create(ctx, choice)
		if done {
			return res, err
		}
	}
}

// chooseOffering sets the state's offering to the cheapest one left, or
// gives the NodeClaim up (gaveUp) when MaxAttempts offerings failed or
// none is left.
func (l *launch) chooseOffering(ctx context.Context) (LaunchResult, bool, error) {
	name := l.nc.Name
	if l.state.Attempt >= l.lr.maxAttempts {
		res, err := l.giveUp(ctx, NewInsufficientCapacityError(name, "%d offerings failed in a row; the last with: %s", l.state.Attempt, l.state.LastError))
		return res, true, err
	}
	choice, err := Choose(l.set.Apply(l.cat), l.nc, *l.spec.MaxPods)
	if err != nil {
		if l.state.LastError != "" {
			err = fmt.Errorf("%w; the last launch failed with: %s", err, l.state.LastError)
		}
		res, gerr := l.giveUp(ctx, NewInsufficientCapacityError(name, "%v", err))
		return res, true, gerr
	}
	l.state.setOffering(choice)
	return LaunchResult{}, false, nil
}

// create begins the NIC and then the VM of choice. done false: the
// offering was refused for capacity and the next one is to be tried now.
func (l *launch) create(ctx context.Context, choice Choice) (LaunchResult, bool, error) {
	req := l.lr.launchRequest(l.nc, l.spec, choice)
	nic, err := l.lr.creator.BeginNIC(ctx, req)
	if err == nil && !strings.EqualFold(nic.State, cloudprovider.StateSucceeded) {
		l.state.Phase = phaseNIC
		res, err := l.requeue(ctx, nicCheck)
		return res, true, err
	}
	if err == nil {
		if err = l.lr.creator.BeginVM(ctx, req, nic.ID); err == nil {
			l.state.Phase, l.state.Checks = phaseVM, 0
			l.lr.log.Info("VM create begun", "nodeclaim", l.nc.Name, "instanceType", choice.InstanceType.Name, "zone", choice.Offering.Zone,
				"capacityType", choice.Offering.CapacityType, "attempt", l.state.Attempt)
			res, err := l.requeue(ctx, l.backoff())
			return res, true, err
		}
	}
	if cloudprovider.IsRetryable(err) {
		res, err := l.retryLater(ctx, err)
		return res, true, err
	}
	retryIn, gaveUp, err := l.failed(ctx, err)
	switch {
	case gaveUp || err != nil:
		return l.res, true, err
	case retryIn > 0:
		res, err := l.requeue(ctx, retryIn)
		return res, true, err
	}
	return LaunchResult{}, false, nil
}

// createFailed handles a VM whose create ended Failed: the failure is
// classified, and unless the NodeClaim is given up (termination then
// deletes the VM) the VM is deleted so that the next create can use the
// name.
func (l *launch) createFailed(ctx context.Context, inst *cloudprovider.Instance) (LaunchResult, error) {
	cause := fmt.Errorf("creating VM %s: %w", l.nc.Name, inst.Failure)
	retryIn, gaveUp, err := l.failed(ctx, cause)
	if gaveUp || err != nil {
		return l.res, err
	}
	if err := l.lr.creator.BeginDelete(ctx, l.nc.Name); err != nil && !cloudprovider.IsRetryable(err) {
		return l.res, err
	}
	l.state.Phase = phaseReplacing
	return l.requeue(ctx, max(retryIn, replaceCheck))
}

// failed records a definitive launch error of the current offering and
// decides what comes next: another offering now (retryIn 0; the state's
// offering is cleared), the same offering after retryIn, or giving up.
func (l *launch) failed(ctx context.Context, cause error) (retryIn time.Duration, gaveUp bool, err error) {
	choice, cerr := l.lr.choice(l.cat, l.state, *l.spec.MaxPods)
	if cerr != nil {
		res, err := l.giveUp(ctx, NewLaunchFailedError(l.nc.Name, "InstanceTypeUnknown", cerr.Error()))
		l.res = res
		return 0, true, err
	}
	l.state.LastError = truncate(cause.Error(), 512)
	recordCreateError(ctx, cause)
	var capacity *cloudprovider.InsufficientCapacityError
	if errors.As(cause, &capacity) {
		return 0, false, l.capacityFailed(ctx, choice, capacity, cause)
	}
	return l.otherFailure(ctx, choice, cause)
}

// capacityFailed marks the offerings ARM said have no capacity and clears
// the state's offering: the next one is tried now.
func (l *launch) capacityFailed(ctx context.Context, choice Choice, capacity *cloudprovider.InsufficientCapacityError, cause error) error {
	entries := offerings.EntriesFor(capacity.Unavailable, l.now)
	l.lr.warn(ctx, l.nc, events.ReasonLaunchFailed, fmt.Sprintf("launching %s (%s, %s): %v",
		choice.InstanceType.Name, choice.Offering.Zone, choice.Offering.CapacityType, cause))
	if err := l.mark(ctx, entries...); err != nil {
		return fmt.Errorf("launching NodeClaim %s: %s; then recording the unavailable offering: %w", l.nc.Name, cause.Error(), err)
	}
	l.state.clearOffering()
	return nil
}

// otherFailure handles an error not about capacity: another try of the
// same offering may work (a transient platform error), the same mistake
// will not. It says so where users look, and stops after MaxFailures.
func (l *launch) otherFailure(ctx context.Context, choice Choice, cause error) (time.Duration, bool, error) {
	state, offering := l.state, choice.Offering
	state.Failures++
	code := cloudprovider.ConditionReason("")
	if create, ok := cloudprovider.AsCreateError(cause); ok {
		code = create.ConditionReason
	}
	msg := fmt.Sprintf("launching %s (%s, %s), attempt %d of %d: %v", choice.InstanceType.Name, offering.Zone, offering.CapacityType,
		state.Failures, l.lr.maxFailures, cause)
	l.lr.warn(ctx, l.nc, events.ReasonLaunchFailed, code+": "+msg)
	if err := l.lr.setLaunchedFalse(ctx, l.nc, code, msg); err != nil {
		return 0, false, err
	}
	if state.Failures < l.lr.maxFailures {
		return l.failureBackoff(), false, nil
	}
	entry := offerings.Entry{CapacityType: offering.CapacityType, InstanceType: choice.InstanceType.Name, Zone: offering.Zone,
		Reason: code, Until: l.now.Add(offerings.DefaultTTL)}
	if err := l.mark(ctx, entry); err != nil {
		return 0, false, err
	}
	res, err := l.giveUp(ctx, NewLaunchFailedError(l.nc.Name, code, fmt.Sprintf("%s failed %d times: %v", state, state.Failures, cause)))
	l.res = res
	return 0, true, err
}

func (l *launch) mark(ctx context.Context, entries ...offerings.Entry) error {
	if l.lr.offerings != nil {
		if err := l.lr.offerings.Mark(ctx, entries...); err != nil {
			return err
		}
	}
	for _, entry := range entries {
		l.res.Marked = append(l.res.Marked, entry.String())
		l.lr.log.Info("offering marked unavailable", "nodeclaim", l.nc.Name, "entry", entry.String())
	}
	l.set = l.set.With(entries...)
	return nil
}

// launched writes what was launched into the NodeClaim: labels for the
// instance type, zone and capacity type, then status providerID, image,
// capacity, allocatable and Launched=True.
func (l *launch) launched(ctx context.Context, inst *cloudprovider.Instance) (LaunchResult, error) {
	res, err := l.recordLaunched(ctx, inst)
	// Another invocation (a launch check and Node events race) may write
	// the NodeClaim first: if it recorded the launch, so be it; else try
	// again on what it wrote.
	for range 5 {
		if !apierrors.IsConflict(err) {
			return res, err
		}
		fresh := &karpv1.NodeClaim{}
		if gerr := l.lr.kube.Get(ctx, client.ObjectKeyFromObject(l.nc), fresh); gerr != nil {
			return res, err
		}
		*l.nc = *fresh
		if fresh.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
			l.res.Launched = true
			return l.res, nil
		}
		if fresh.DeletionTimestamp != nil {
			return l.res, nil
		}
		res, err = l.recordLaunched(ctx, inst)
	}
	return res, err
}

func (l *launch) recordLaunched(ctx context.Context, inst *cloudprovider.Instance) (LaunchResult, error) {
	lr, nc := l.lr, l.nc
	choice, err := lr.choice(l.cat, l.state, *l.spec.MaxPods)
	if err != nil {
		return l.giveUp(ctx, NewLaunchFailedError(nc.Name, "InstanceTypeUnknown", err.Error()))
	}
	instanceType, offering := choice.InstanceType, choice.Offering
	// The liveness check goes out with this look's outcome, also when
	// writing Launched fails: the retry asks for it again under the same
	// MessageId, which duplicate detection drops.
	l.res.Continuations = append(l.res.Continuations, triggers.Liveness(lr.cluster, nc.Name, string(nc.UID), lr.clock.Now().Add(lr.regTTL)))
	// Labels first (metadata), then status: two writes, each guarded by
	// resourceVersion so a concurrent writer makes us retry, not clobber.
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for key, value := range instanceType.Labels {
		nc.Labels[key] = value
	}
	nc.Labels[corev1.LabelTopologyZone] = offering.Zone
	nc.Labels[karpv1.CapacityTypeLabelKey] = offering.CapacityType
	if err := lr.kube.Patch(ctx, nc, patch); err != nil {
		return l.res, fmt.Errorf("labelling NodeClaim %s after launch: %w", nc.Name, err)
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID = inst.ProviderID
	nc.Status.ImageID = inst.ImageID
	nc.Status.Capacity = instanceType.Capacity.DeepCopy()
	nc.Status.Allocatable = instanceType.Allocatable()
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	if err := lr.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return l.res, fmt.Errorf("writing NodeClaim %s status after launch: %w", nc.Name, err)
	}
	lr.log.Info("launched nodeclaim", "nodeclaim", nc.Name, "instanceType", instanceType.Name, "zone", offering.Zone,
		"capacityType", offering.CapacityType, "price", offering.Price, "providerID", inst.ProviderID, "sinceBegun", l.now.Sub(l.state.Begun))
	lr.decide(ctx, decisions.Launch, nc, CreatedFor(nc))
	if err := lr.recorder.Publish(ctx, events.Event{Object: nc, Type: corev1.EventTypeNormal, Reason: events.ReasonLaunched,
		Message: fmt.Sprintf("Launched %s in %s (%s) at $%.4f/h", instanceType.Name, offering.Zone, offering.CapacityType, offering.Price)}); err != nil {
		lr.log.Warn("writing event", "error", err)
	}
	if err := nodepoolstatus.Update(ctx, lr.kube, nc.Labels[karpv1.NodePoolLabelKey]); err != nil {
		lr.log.Warn("updating nodepool resources", "error", err)
	}
	l.res.Launched = true
	return l.res, nil
}

// giveUp deletes a NodeClaim that cannot be launched, as Karpenter does on
// InsufficientCapacityError: the deletion goes through the termination
// finalizer (which deletes anything a failed attempt left), and the pods,
// pending again, are provisioned on the next pass.
func (l *launch) giveUp(ctx context.Context, cause error) (LaunchResult, error) {
	lr, nc := l.lr, l.nc
	reason := events.ReasonLaunchFailed
	if IsInsufficientCapacity(cause) {
		reason = events.ReasonInsufficientCapacityError
	}
	lr.warn(ctx, nc, reason, fmt.Sprintf("NodeClaim %s event: %v; deleting the NodeClaim", nc.Name, cause))
	if err := lr.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
		return l.res, fmt.Errorf("%s; then deleting the NodeClaim: %w", cause.Error(), err)
	}
	lr.log.Warn("gave up nodeclaim", "nodeclaim", nc.Name, "reason", cause)
	lr.decide(ctx, decisions.GiveUp, nc, cause.Error())
	l.res.GaveUp, l.res.RequeueAt = true, time.Time{}
	return l.res, nil
}

// requeue records the state with the next look delay from now.
func (l *launch) requeue(ctx context.Context, delay time.Duration) (LaunchResult, error) {
	l.state.NextCheck = l.now.Add(delay)
	if err := l.lr.writeLaunchState(ctx, l.nc, l.state); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Someone else wrote the NodeClaim (or deleted it): the next
			// look starts from what they wrote.
			l.lr.log.Info("launch state not recorded; looking again", "nodeclaim", l.nc.Name, "error", err)
			l.res.RequeueAt = l.now.Add(nicCheck)
			return l.res, nil
		}
		return l.res, err
	}
	l.res.RequeueAt = l.state.NextCheck
	return l.res, nil
}

// retryLater is the answer to an error that says nothing about the
// launch (throttling, 5xx, a transport error): look again when ARM asked,
// counting nothing as failed.
func (l *launch) retryLater(ctx context.Context, cause error) (LaunchResult, error) {
	delay := max(cloudprovider.RetryAfter(cause), nicCheck)
	if l.state != nil {
		delay = max(delay, l.backoff())
	}
	l.lr.log.Warn("ARM did not answer the launch; looking again later", "nodeclaim", l.nc.Name, "in", delay, "error", cause)
	if l.state == nil {
		l.res.RequeueAt = l.now.Add(delay)
		return l.res, nil
	}
	return l.requeue(ctx, delay)
}

// backoff is the wait before the next look at a running create:
// CheckInterval, doubling, at most four times that.
func (l *launch) backoff() time.Duration {
	delay := l.lr.checkInterval << min(l.state.Checks, 2)
	l.state.Checks++
	return delay
}

func (l *launch) failureBackoff() time.Duration {
	return l.lr.checkInterval << min(l.state.Failures-1, 2)
}

// setLaunchedFalse writes Launched=False with reason and message.
func (lr *launcher) setLaunchedFalse(ctx context.Context, nc *karpv1.NodeClaim, reason, msg string) error {
	stored := nc.DeepCopy()
	nc.StatusConditions().SetFalse(karpv1.ConditionTypeLaunched, reason, truncate(msg, 1024))
	if err := lr.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("writing NodeClaim %s Launched=False: %w", nc.Name, err)
	}
	return nil
}

func truncate(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	return strings.ToValidUTF8(text[:limit-3], "") + "..."
}

func (lr *launcher) launchRequest(nc *karpv1.NodeClaim, spec v1beta1.AKSNodeClassSpec, choice Choice) cloudprovider.LaunchRequest {
	instanceType, offering := choice.InstanceType, choice.Offering
	nodeLabels := map[string]string{}
	for key, value := range nc.Labels {
		nodeLabels[key] = value
	}
	for key, value := range instanceType.Labels {
		nodeLabels[key] = value
	}
	nodeLabels[corev1.LabelTopologyZone] = offering.Zone
	nodeLabels[karpv1.CapacityTypeLabelKey] = offering.CapacityType
	taints := append([]corev1.Taint{}, nc.Spec.Taints...)
	taints = append(taints, nc.Spec.StartupTaints...)
	taints = append(taints, karpv1.UnregisteredNoExecuteTaint)
	req := cloudprovider.LaunchRequest{
		Name: nc.Name, NodePool: nc.Labels[karpv1.NodePoolLabelKey], NodeClaim: nc.Name,
		InstanceType: instanceType.Name, Zone: offering.Zone, CapacityType: offering.CapacityType,
		Architecture: instanceType.Architecture, HyperVGenerations: instanceType.HyperVGenerations,
		ImageFamily: *spec.ImageFamily, OSDiskSizeGB: *spec.OSDiskSizeGB, MaxPods: *spec.MaxPods,
		Labels: nodeLabels, Taints: taints, Kubelet: spec.Kubelet, Tags: spec.Tags,
	}
	if spec.VNETSubnetID != nil {
		req.SubnetID = *spec.VNETSubnetID
	}
	req.EphemeralOSDiskPlacement = instanceType.EphemeralOSDiskPlacement(req.OSDiskSizeGB)
	// The kubelet keeps what the engine subtracted when it chose the size;
	// a type without reservations (a catalog file's overhead naming a
	// resource no kubelet reserves) is refused by the node bootstrap.
	if reservations, err := instanceType.WithMaxPods(*spec.MaxPods).Reservations(); err == nil {
		req.Reservations = &reservations
	} else {
		lr.log.Warn("launching a size without kubelet reservations", "nodeclaim", nc.Name, "error", err)
	}
	if spec.Security != nil && spec.Security.EncryptionAtHost != nil {
		req.EncryptionAtHost = *spec.Security.EncryptionAtHost
	}
	if spec.LinuxOSConfig != nil {
		req.Sysctls = spec.LinuxOSConfig.Sysctls
	}
	req.GPUMode = gpu.Mode(&spec)
	return req
}

func (lr *launcher) warn(ctx context.Context, obj client.Object, reason, msg string) {
	if err := lr.recorder.Publish(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: reason, Message: msg}); err != nil {
		lr.log.Warn("writing event", "error", err)
	}
}

// NodeClassOf reads the AKSNodeClass nc's nodeClassRef names; a ref of
// another group or kind, or a class that does not exist, is an error that
// says what to fix.
func NodeClassOf(ctx context.Context, kube client.Reader, nc *karpv1.NodeClaim) (*v1beta1.AKSNodeClass, error) {
	ref := nc.Spec.NodeClassRef
	if ref == nil || ref.Group != NodeClassGroup || ref.Kind != NodeClassKind {
		return nil, fmt.Errorf("NodeClaim %s: nodeClassRef must be group %s kind %s", nc.Name, NodeClassGroup, NodeClassKind)
	}
	class := &v1beta1.AKSNodeClass{}
	if err := kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("NodeClaim %s references AKSNodeClass %q, which does not exist; create it or fix the NodePool's nodeClassRef", nc.Name, ref.Name)
		}
		return nil, fmt.Errorf("reading AKSNodeClass %s: %w", ref.Name, err)
	}
	return class, nil
}

func (lr *launcher) loadUnavailable(ctx context.Context) (*offerings.Set, error) {
	if lr.offerings == nil {
		return &offerings.Set{}, nil
	}
	return lr.offerings.Load(ctx)
}

// decide records a launch or give-up of nc, described by the labels the
// launch wrote (instance type, zone, capacity type) and the catalog's price.
func (lr *launcher) decide(ctx context.Context, kind decisions.Kind, nc *karpv1.NodeClaim, reason string) {
	record := decisions.Record{Decision: kind, Time: lr.clock.Now().UTC(), Cluster: lr.cluster,
		NodePool: nc.Labels[karpv1.NodePoolLabelKey], NodeClaim: nc.Name, Reason: reason,
		Size: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
		CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey]}
	if instanceType, ok := lr.catalog.Get(record.Size); ok {
		for _, offering := range instanceType.Offerings {
			if offering.Zone == record.Zone && offering.CapacityType == record.CapacityType {
				record.PricePerHour = offering.Price
			}
		}
	}
	lr.decisions.Record(ctx, record)
}
