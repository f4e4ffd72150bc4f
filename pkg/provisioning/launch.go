package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Choice is the instance type and offering a NodeClaim launches as.
type Choice struct {
	InstanceType *catalog.InstanceType
	Offering     catalog.Offering
}

// Choose picks the offering a NodeClaim launches as: among the instance
// types its requirements allow whose allocatable (with maxPods) fits its
// requests, the one cloudprovider.Cheapest picks, the rule the plan uses
// too. It depends only on the NodeClaim spec and the catalog, so a retried
// launch picks the same VM.
func Choose(cat *catalog.Catalog, nc *karpv1.NodeClaim, maxPods int32) (Choice, error) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	names := reqs.Get(corev1.LabelInstanceTypeStable)
	fitting := make([]*catalog.InstanceType, 0, len(cat.InstanceTypes))
	for _, it := range cat.InstanceTypes {
		if !names.Has(it.Name) {
			continue
		}
		if sized := it.WithMaxPods(maxPods); resources.Fits(nc.Spec.Resources.Requests, sized.Allocatable()) {
			fitting = append(fitting, sized)
		}
	}
	best, offering := cloudprovider.Cheapest(fitting, reqs)
	if best == nil {
		return Choice{}, fmt.Errorf("NodeClaim %s: no available offering satisfies its requirements (%s) and fits its requests (%s)",
			nc.Name, reqs.String(), resources.String(nc.Spec.Resources.Requests))
	}
	return Choice{InstanceType: best, Offering: offering}, nil
}

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
	// scheduled message; the next Provision pass takes it up again.
	stalledLaunch = time.Minute
)

// LaunchTimeout bounds a whole launch, every offering tried included: a
// NodeClaim whose VM is still not created then is given up (ARM's own
// create timeouts are far longer than a pending pod should wait).
const LaunchTimeout = 15 * time.Minute

// DefaultMaxLaunchFailures is how many times one offering's launch may
// fail for a reason other than capacity before the offering is excluded
// and the NodeClaim given up.
const DefaultMaxLaunchFailures = 3

// LaunchResult says where one look at a NodeClaim's launch left it.
type LaunchResult struct {
	Launched bool // Launched=True, by this look or before
	// GaveUp: the NodeClaim was deleted (no offering left, or its launch
	// cannot succeed); its pods are provisioned again.
	GaveUp bool
	// RequeueAt is when to look again; zero when nothing is left to look at.
	RequeueAt time.Time
	Marked    []string // offerings marked unavailable, described
}

// ReconcileLaunch moves nc's launch on by one step and returns when to
// look at it again (zero: launched, given up, or not ours to launch). It
// never waits for Azure: it begins the NIC and the VM create, and later
// looks reads the VM. Succeeded: nc is Launched, with the VM's providerID,
// capacity and allocatable (nc is updated in place). Failed: the error is
// classified; a capacity or quota error marks the offering unavailable and
// the next offering is created, any other error is written as Launched=False
// with ARM's code and retried until MaxLaunchFailures, then the offering is
// excluded and the NodeClaim given up; either way, after MaxLaunchAttempts
// offerings or with none left, nc is deleted and a provisioning pass
// scheduled. An error reading the VM (throttling, 5xx) is no verdict: the
// create may be running, so nothing is deleted and the look is repeated.
//
// nodeJoined says a Node with the NodeClaim's name joined: the VM is then
// looked at right away, not when the next check is due.
func (p *Provisioner) ReconcileLaunch(ctx context.Context, nc *karpv1.NodeClaim, nodeJoined bool) (time.Time, error) {
	set, err := p.loadUnavailable(ctx)
	if err != nil {
		return time.Time{}, err
	}
	res, err := p.reconcileLaunch(ctx, nc, set, nodeJoined)
	if res.GaveUp {
		if _, serr := p.scheduleProvision(ctx, retryDelay); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return res.RequeueAt, err
}

// Launch is ReconcileLaunch that also schedules the launch check it asks for.
func (p *Provisioner) Launch(ctx context.Context, nc *karpv1.NodeClaim) error {
	at, err := p.ReconcileLaunch(ctx, nc, false)
	if err != nil || at.IsZero() {
		return err
	}
	return p.scheduleLaunchCheck(ctx, nc, at)
}

// launchStalled reports whether nc needs a Provision pass to look at its
// launch: it was never begun, or its scheduled check is long overdue.
func launchStalled(nc *karpv1.NodeClaim, now time.Time) bool {
	st := launchStateOf(nc)
	return st == nil || now.After(st.NextCheck.Add(stalledLaunch))
}

func (p *Provisioner) scheduleLaunchCheck(ctx context.Context, nc *karpv1.NodeClaim, at time.Time) error {
	return triggers.Publish(ctx, p.publisher, triggers.LaunchCheck(p.clusterName, nc.Name, string(nc.UID), at))
}

// launch is one reconcile of one NodeClaim's launch.
type launch struct {
	p    *Provisioner
	nc   *karpv1.NodeClaim
	spec v1beta1.AKSNodeClassSpec
	st   *launchState
	set  *offerings.Set
	res  LaunchResult
	now  time.Time
}

func (p *Provisioner) reconcileLaunch(ctx context.Context, nc *karpv1.NodeClaim, set *offerings.Set, nodeJoined bool) (LaunchResult, error) {
	if nc.DeletionTimestamp != nil {
		return LaunchResult{}, nil
	}
	if nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		return LaunchResult{Launched: true}, nil
	}
	l := &launch{p: p, nc: nc, st: launchStateOf(nc), set: set, now: p.clock.Now()}
	if l.st != nil && !nodeJoined && l.now.Before(l.st.NextCheck.Add(-checkSlack)) {
		// A look is already due then (this is a duplicate, or a second
		// chain of checks): leave the work to it.
		return LaunchResult{RequeueAt: l.st.NextCheck}, nil
	}
	class, err := p.nodeClass(ctx, nc)
	if err != nil {
		return LaunchResult{}, err
	}
	l.spec = class.DefaultedSpec()
	if l.st != nil && l.now.Sub(l.st.Begun) > LaunchTimeout {
		return l.giveUp(ctx, NewLaunchFailedError(nc.Name, "LaunchTimeout",
			fmt.Sprintf("VM %s did not finish creating within %s of the launch's first create", l.st, LaunchTimeout)))
	}
	inst, err := p.launcher.Status(ctx, nc.Name)
	switch {
	case cloudprovider.IsNodeClaimNotFound(err):
		return l.begin(ctx)
	case err != nil:
		return l.retryLater(ctx, err)
	}
	if l.st != nil && l.st.Phase == phaseReplacing {
		if res, waiting, err := l.awaitReplaced(ctx, inst); waiting || err != nil {
			return res, err
		}
	}
	if l.st == nil || !l.st.describes(inst) {
		l.adopt(inst)
	}
	return l.follow(ctx, inst)
}

// awaitReplaced: the failed VM is on its way out; the next create waits
// for it (waiting true) until the VM is gone or a new create runs.
func (l *launch) awaitReplaced(ctx context.Context, inst *cloudprovider.Instance) (LaunchResult, bool, error) {
	if strings.EqualFold(inst.State, cloudprovider.StateFailed) {
		if err := l.p.launcher.BeginDelete(ctx, l.nc.Name); err != nil {
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
	if l.st == nil {
		begun := inst.CreatedAt
		if begun.IsZero() || begun.After(l.now) {
			begun = l.now
		}
		l.st = &launchState{Begun: begun, Attempt: 1}
	}
	l.st.InstanceType, l.st.Zone, l.st.CapacityType = inst.InstanceType, inst.Zone, inst.CapacityType
	l.st.Phase = phaseVM
}

// begin starts the create of the current offering (choosing one first when
// there is none): the NIC, then, once the NIC is Succeeded, the VM. An
// offering ARM refuses synchronously for capacity is marked and the next
// one begun in the same call.
func (l *launch) begin(ctx context.Context) (LaunchResult, error) {
	p, nc := l.p, l.nc
	if l.st == nil {
		l.st = &launchState{Begun: l.now}
	}
	for {
		if !l.st.hasOffering() {
			if l.st.Attempt >= p.maxAttempts {
				return l.giveUp(ctx, NewInsufficientCapacityError(nc.Name, "%d offerings failed in a row; the last with: %s", l.st.Attempt, l.st.LastError))
			}
			c, err := Choose(l.set.Apply(p.catalog), nc, *l.spec.MaxPods)
			if err != nil {
				if l.st.LastError != "" {
					err = fmt.Errorf("%w; the last launch failed with: %s", err, l.st.LastError)
				}
				return l.giveUp(ctx, NewInsufficientCapacityError(nc.Name, "%v", err))
			}
			l.st.setOffering(c)
		}
		c, err := p.choice(l.st, *l.spec.MaxPods)
		if err != nil {
			return l.giveUp(ctx, NewLaunchFailedError(nc.Name, "InstanceTypeUnknown", err.Error()))
		}
		req := p.launchRequest(nc, l.spec, c)
		nic, err := p.launcher.BeginNIC(ctx, req)
		if err == nil && !strings.EqualFold(nic.State, cloudprovider.StateSucceeded) {
			l.st.Phase = phaseNIC
			return l.requeue(ctx, nicCheck)
		}
		if err == nil {
			if err = p.launcher.BeginVM(ctx, req, nic.ID); err == nil {
				l.st.Phase, l.st.Checks = phaseVM, 0
				p.log.Info("VM create begun", "nodeclaim", nc.Name, "instanceType", c.InstanceType.Name, "zone", c.Offering.Zone,
					"capacityType", c.Offering.CapacityType, "attempt", l.st.Attempt)
				return l.requeue(ctx, l.backoff())
			}
		}
		if cloudprovider.IsRetryable(err) {
			return l.retryLater(ctx, err)
		}
		retryIn, gaveUp, ferr := l.failed(ctx, err)
		if gaveUp || ferr != nil {
			return l.res, ferr
		}
		if retryIn > 0 {
			return l.requeue(ctx, retryIn)
		}
	}
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
	if err := l.p.launcher.BeginDelete(ctx, l.nc.Name); err != nil && !cloudprovider.IsRetryable(err) {
		return l.res, err
	}
	l.st.Phase = phaseReplacing
	return l.requeue(ctx, max(retryIn, replaceCheck))
}

// failed records a definitive launch error of the current offering and
// decides what comes next: another offering now (retryIn 0; the state's
// offering is cleared), the same offering after retryIn, or giving up.
func (l *launch) failed(ctx context.Context, cause error) (retryIn time.Duration, gaveUp bool, err error) {
	p, nc, st := l.p, l.nc, l.st
	c, cerr := p.choice(st, *l.spec.MaxPods)
	if cerr != nil {
		res, err := l.giveUp(ctx, NewLaunchFailedError(nc.Name, "InstanceTypeUnknown", cerr.Error()))
		l.res = res
		return 0, true, err
	}
	it, off := c.InstanceType, c.Offering
	st.LastError = truncate(cause.Error(), 512)
	recordCreateError(ctx, cause)
	var capacity *cloudprovider.InsufficientCapacityError
	if errors.As(cause, &capacity) {
		entries := offerings.EntriesFor(capacity.Unavailable, l.now)
		p.warn(ctx, nc, events.ReasonLaunchFailed, fmt.Sprintf("launching %s (%s, %s): %v", it.Name, off.Zone, off.CapacityType, cause))
		if err := l.mark(ctx, entries...); err != nil {
			return 0, false, fmt.Errorf("launching NodeClaim %s: %s; then recording the unavailable offering: %w", nc.Name, cause.Error(), err)
		}
		st.clearOffering()
		return 0, false, nil
	}
	// Not about capacity: another try of the same offering may work (a
	// transient platform error), the same mistake will not. Say so where
	// users look, and stop after MaxLaunchFailures.
	st.Failures++
	code := cloudprovider.ConditionReason("")
	if create, ok := cloudprovider.AsCreateError(cause); ok {
		code = create.ConditionReason
	}
	msg := fmt.Sprintf("launching %s (%s, %s), attempt %d of %d: %v", it.Name, off.Zone, off.CapacityType, st.Failures, p.maxFailures, cause)
	p.warn(ctx, nc, events.ReasonLaunchFailed, code+": "+msg)
	if err := p.setLaunchedFalse(ctx, nc, code, msg); err != nil {
		return 0, false, err
	}
	if st.Failures < p.maxFailures {
		return l.failureBackoff(), false, nil
	}
	entry := offerings.Entry{CapacityType: off.CapacityType, InstanceType: it.Name, Zone: off.Zone, Reason: code, Until: l.now.Add(offerings.DefaultTTL)}
	if err := l.mark(ctx, entry); err != nil {
		return 0, false, err
	}
	res, err := l.giveUp(ctx, NewLaunchFailedError(nc.Name, code, fmt.Sprintf("%s failed %d times: %v", st, st.Failures, cause)))
	l.res = res
	return 0, true, err
}

func (l *launch) mark(ctx context.Context, entries ...offerings.Entry) error {
	if l.p.offerings != nil {
		if err := l.p.offerings.Mark(ctx, entries...); err != nil {
			return err
		}
	}
	for _, e := range entries {
		l.res.Marked = append(l.res.Marked, e.String())
		l.p.log.Info("offering marked unavailable", "nodeclaim", l.nc.Name, "entry", e.String())
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
		if gerr := l.p.kube.Get(ctx, client.ObjectKeyFromObject(l.nc), fresh); gerr != nil {
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
	p, nc := l.p, l.nc
	c, err := p.choice(l.st, *l.spec.MaxPods)
	if err != nil {
		return l.giveUp(ctx, NewLaunchFailedError(nc.Name, "InstanceTypeUnknown", err.Error()))
	}
	it, off := c.InstanceType, c.Offering
	// The liveness check is scheduled before Launched is written: if this
	// invocation dies in between, the retry schedules it again under the
	// same MessageId, which duplicate detection drops.
	if err := p.scheduleLiveness(ctx, nc); err != nil {
		return l.res, err
	}
	// Labels first (metadata), then status: two writes, each guarded by
	// resourceVersion so a concurrent writer makes us retry, not clobber.
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for k, v := range it.Labels {
		nc.Labels[k] = v
	}
	nc.Labels[corev1.LabelTopologyZone] = off.Zone
	nc.Labels[karpv1.CapacityTypeLabelKey] = off.CapacityType
	if err := p.kube.Patch(ctx, nc, patch); err != nil {
		return l.res, fmt.Errorf("labelling NodeClaim %s after launch: %w", nc.Name, err)
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID = inst.ProviderID
	nc.Status.ImageID = inst.ImageID
	nc.Status.Capacity = it.Capacity.DeepCopy()
	nc.Status.Allocatable = it.Allocatable()
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	if err := p.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return l.res, fmt.Errorf("writing NodeClaim %s status after launch: %w", nc.Name, err)
	}
	p.log.Info("launched nodeclaim", "nodeclaim", nc.Name, "instanceType", it.Name, "zone", off.Zone,
		"capacityType", off.CapacityType, "price", off.Price, "providerID", inst.ProviderID, "sinceBegun", l.now.Sub(l.st.Begun))
	p.decide(ctx, decisions.Launch, nc, createdFor(nc), nil)
	if err := p.recorder.Publish(ctx, events.Event{Object: nc, Type: corev1.EventTypeNormal, Reason: events.ReasonLaunched,
		Message: fmt.Sprintf("Launched %s in %s (%s) at $%.4f/h", it.Name, off.Zone, off.CapacityType, off.Price)}); err != nil {
		p.log.Warn("writing event", "error", err)
	}
	if err := nodepoolstatus.Update(ctx, p.kube, nc.Labels[karpv1.NodePoolLabelKey]); err != nil {
		p.log.Warn("updating nodepool resources", "error", err)
	}
	l.res.Launched = true
	return l.res, nil
}

// giveUp deletes a NodeClaim that cannot be launched, as Karpenter does on
// InsufficientCapacityError: the deletion goes through the termination
// finalizer (which deletes anything a failed attempt left), and the pods,
// pending again, are provisioned on the next pass.
func (l *launch) giveUp(ctx context.Context, cause error) (LaunchResult, error) {
	p, nc := l.p, l.nc
	reason := events.ReasonLaunchFailed
	if IsInsufficientCapacity(cause) {
		reason = events.ReasonInsufficientCapacityError
	}
	p.warn(ctx, nc, reason, fmt.Sprintf("NodeClaim %s event: %v; deleting the NodeClaim", nc.Name, cause))
	if err := p.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
		return l.res, fmt.Errorf("%s; then deleting the NodeClaim: %w", cause.Error(), err)
	}
	p.log.Warn("gave up nodeclaim", "nodeclaim", nc.Name, "reason", cause)
	p.decide(ctx, decisions.GiveUp, nc, cause.Error(), nil)
	l.res.GaveUp, l.res.RequeueAt = true, time.Time{}
	return l.res, nil
}

// requeue records the state with the next look d from now.
func (l *launch) requeue(ctx context.Context, d time.Duration) (LaunchResult, error) {
	l.st.NextCheck = l.now.Add(d)
	if err := l.p.writeLaunchState(ctx, l.nc, l.st); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Someone else wrote the NodeClaim (or deleted it): the next
			// look starts from what they wrote.
			l.p.log.Info("launch state not recorded; looking again", "nodeclaim", l.nc.Name, "error", err)
			l.res.RequeueAt = l.now.Add(nicCheck)
			return l.res, nil
		}
		return l.res, err
	}
	l.res.RequeueAt = l.st.NextCheck
	return l.res, nil
}

// retryLater is the answer to an error that says nothing about the
// launch (throttling, 5xx, a transport error): look again when ARM asked,
// counting nothing as failed.
func (l *launch) retryLater(ctx context.Context, cause error) (LaunchResult, error) {
	d := max(cloudprovider.RetryAfter(cause), nicCheck)
	if l.st != nil {
		d = max(d, l.backoff())
	}
	l.p.log.Warn("ARM did not answer the launch; looking again later", "nodeclaim", l.nc.Name, "in", d, "error", cause)
	if l.st == nil {
		l.res.RequeueAt = l.now.Add(d)
		return l.res, nil
	}
	return l.requeue(ctx, d)
}

// backoff is the wait before the next look at a running create:
// LaunchCheckInterval, doubling, at most four times that.
func (l *launch) backoff() time.Duration {
	d := l.p.checkInterval << min(l.st.Checks, 2)
	l.st.Checks++
	return d
}

func (l *launch) failureBackoff() time.Duration {
	return l.p.checkInterval << min(l.st.Failures-1, 2)
}

// setLaunchedFalse writes Launched=False with reason and message.
func (p *Provisioner) setLaunchedFalse(ctx context.Context, nc *karpv1.NodeClaim, reason, msg string) error {
	stored := nc.DeepCopy()
	nc.StatusConditions().SetFalse(karpv1.ConditionTypeLaunched, reason, truncate(msg, 1024))
	if err := p.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("writing NodeClaim %s Launched=False: %w", nc.Name, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

func (p *Provisioner) launchRequest(nc *karpv1.NodeClaim, spec v1beta1.AKSNodeClassSpec, choice Choice) cloudprovider.LaunchRequest {
	it, off := choice.InstanceType, choice.Offering
	nodeLabels := map[string]string{}
	for k, v := range nc.Labels {
		nodeLabels[k] = v
	}
	for k, v := range it.Labels {
		nodeLabels[k] = v
	}
	nodeLabels[corev1.LabelTopologyZone] = off.Zone
	nodeLabels[karpv1.CapacityTypeLabelKey] = off.CapacityType
	taints := append([]corev1.Taint{}, nc.Spec.Taints...)
	taints = append(taints, nc.Spec.StartupTaints...)
	taints = append(taints, karpv1.UnregisteredNoExecuteTaint)
	req := cloudprovider.LaunchRequest{
		Name: nc.Name, NodePool: nc.Labels[karpv1.NodePoolLabelKey], NodeClaim: nc.Name,
		InstanceType: it.Name, Zone: off.Zone, CapacityType: off.CapacityType,
		Architecture: it.Architecture, HyperVGenerations: it.HyperVGenerations,
		ImageFamily: *spec.ImageFamily, OSDiskSizeGB: *spec.OSDiskSizeGB, MaxPods: *spec.MaxPods,
		Labels: nodeLabels, Taints: taints, Kubelet: spec.Kubelet, Tags: spec.Tags,
	}
	if spec.VNETSubnetID != nil {
		req.SubnetID = *spec.VNETSubnetID
	}
	return req
}

func (p *Provisioner) scheduleLiveness(ctx context.Context, nc *karpv1.NodeClaim) error {
	return triggers.Publish(ctx, p.publisher, triggers.Liveness(p.clusterName, nc.Name, string(nc.UID), p.clock.Now().Add(p.regTTL)))
}

func (p *Provisioner) warn(ctx context.Context, obj client.Object, reason, msg string) {
	if err := p.recorder.Publish(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: reason, Message: msg}); err != nil {
		p.log.Warn("writing event", "error", err)
	}
}

func (p *Provisioner) nodeClass(ctx context.Context, nc *karpv1.NodeClaim) (*v1beta1.AKSNodeClass, error) {
	ref := nc.Spec.NodeClassRef
	if ref == nil || ref.Group != NodeClassGroup || ref.Kind != NodeClassKind {
		return nil, fmt.Errorf("NodeClaim %s: nodeClassRef must be group %s kind %s", nc.Name, NodeClassGroup, NodeClassKind)
	}
	class := &v1beta1.AKSNodeClass{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("NodeClaim %s references AKSNodeClass %q, which does not exist; create it or fix the NodePool's nodeClassRef", nc.Name, ref.Name)
		}
		return nil, fmt.Errorf("reading AKSNodeClass %s: %w", ref.Name, err)
	}
	return class, nil
}
