// Package provisioning turns pending pods into NodeClaims.
//
// It reads the whole snapshot from the API server on every call (messages are
// triggers, not state), asks the pure scheduler where pods go and creates the
// NodeClaims it decides on; it launches nothing. Launching is lifecycle's
// first reconciler (package lifecycle), as in Karpenter: a pass asks for a
// launch check of every NodeClaim it created and of any whose launch stalled
// (Result.Outcome), and never publishes: its caller sends the outcome's
// continuations. The pass, disruption's replacement (Replace) and
// interruption's evacuation (Evacuate) create NodeClaims over one path
// (create). Every step is idempotent: NodeClaim names are derived from their
// pods and the pass's view of the cluster's name counter (package
// claimnames), and in-flight NodeClaims count as capacity on the next pass,
// so a re-delivered message creates nothing new. A NodeClaim name is never
// used twice in the cluster's life: the view is read before the snapshot, a
// pass retires the generations it created (termination retires a claim's
// before its finalizer goes), and a name whose generation was retired since
// the view is adopted or not created (see create). A pass never waits on a
// NodeClaim it cannot use: names move to the next generation when the
// snapshot already holds one. Every pending pod leaves a pass with one
// Outcome.
package provisioning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Options configure a Provisioner.
type Options struct {
	Kube        client.Client
	Catalog     *catalog.Catalog
	ClusterName string
	Clock       clock.Clock
	Logger      *slog.Logger
	// Offerings is the shared unavailable-offerings state; nil disables it
	// (every offering the catalog calls available is tried).
	Offerings *offerings.Store
	// Quota reads the subscription's compute quota and use (quota.go); nil
	// turns quota awareness off, leaving quota to launch errors and the
	// Offerings cache they fill.
	Quota UsageReader
	// QuotaTTL is how long a read of the usages serves passes (default
	// DefaultQuotaTTL).
	QuotaTTL time.Duration
	// Namespace holds karpfunc's coordination objects (the NodePool limits
	// Leases, the NodeClaim name counter); default kube-system, as the
	// offerings state.
	Namespace string
	// LimitsLeaseDuration bounds how long a pass holds a NodePool's limits
	// Lease (default DefaultLimitsLeaseDuration).
	LimitsLeaseDuration time.Duration
	// StuckAfter is how long a placed pod may stay pending before the pass
	// writes a FailedScheduling event saying what it waits for (default
	// DefaultStuckAfter).
	StuckAfter time.Duration
	// Status, when set, makes every pass write NodePool and AKSNodeClass
	// status first (nodepoolstatus.Sync) and launch nothing from a
	// NodePool that is not Ready, as Karpenter's provisioner; nil writes
	// no status and trusts every NodePool.
	Status *nodepoolstatus.ClassOptions
	// DefaultMaxPods is the cluster network's max pods default for classes
	// that set none (see scheduler.Input); 0 is v1beta1.DefaultMaxPods.
	DefaultMaxPods int32
	// MaxStuckReports bounds the stuck-pod FailedScheduling reports one
	// pass makes (default DefaultMaxStuckReports); the rest wait for
	// later passes and are counted in Result.EventsNotWritten.
	MaxStuckReports int
	// NominationLimiter, when set, replaces the Provisioner's own
	// Karpenter-like limiter of Nominated events (tests give one on a
	// fake clock).
	NominationLimiter flowcontrol.PassiveRateLimiter
	// DisableStaticCapacity refuses static NodePools (spec.replicas) with
	// a Warning event instead of keeping their replicas (package
	// staticcapacity); the caller's Status options should then set
	// RefuseStatic, so their status says so too.
	DisableStaticCapacity bool
	// Overlays reads the NodeOverlays each pass plans with and writes
	// their status; nil plans with catalog prices.
	Overlays *nodeoverlay.Source
	// DisableCapacityBuffers refuses every CapacityBuffer by name (status
	// and a Warning event) instead of keeping its room (package
	// capacitybuffer).
	DisableCapacityBuffers bool
}

// DefaultStuckAfter is longer than a launch and registration take on Azure.
const DefaultStuckAfter = 5 * time.Minute

// DefaultMaxStuckReports keeps a pass's stuck-pod reports to about two
// seconds at the handler's 50 requests a second: a report is a read and a
// write (its dedupe window is the event).
const DefaultMaxStuckReports = 50

// StuckDedupeTimeout is Karpenter's window for a pod's FailedScheduling
// event (sigs.k8s.io/karpenter pkg/controllers/provisioning/scheduling/
// events.go PodFailedToScheduleEvent: DedupeValues pod UID, 5 minutes):
// a stuck pod is reported once per window, although its message (the time
// waited) changes on every pass.
const StuckDedupeTimeout = 5 * time.Minute

// Karpenter's PodNominationRateLimiter (sigs.k8s.io/karpenter
// pkg/controllers/provisioning/scheduling/events.go): a token bucket of 5
// a second with a burst of 10, shared by all Nominated events.
const (
	NominationQPS   = 5
	NominationBurst = 10
)

// Provisioner places pending pods.
type Provisioner struct {
	kube        client.Client
	catalog     *catalog.Catalog
	clusterName string
	clock       clock.Clock
	log         *slog.Logger
	recorder    *events.Recorder
	offerings   *offerings.Store
	quota       *quotaCache
	stuckAfter  time.Duration
	limits      limitGuard
	names       *claimnames.Counter
	status      *nodepoolstatus.ClassOptions
	maxStuck    int
	maxPods     int32 // Options.DefaultMaxPods
	staticOff   bool  // Options.DisableStaticCapacity
	overlays    *nodeoverlay.Source
	buffersOff  bool // Options.DisableCapacityBuffers
	// nominations is shared by every Nominated event this Provisioner
	// writes, over all its passes (a warm instance keeps it).
	nominations flowcontrol.PassiveRateLimiter
}

// New returns a Provisioner.
func New(opts Options) *Provisioner {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Namespace == "" {
		opts.Namespace = offerings.DefaultNamespace
	}
	if opts.LimitsLeaseDuration <= 0 {
		opts.LimitsLeaseDuration = DefaultLimitsLeaseDuration
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	if opts.MaxStuckReports <= 0 {
		opts.MaxStuckReports = DefaultMaxStuckReports
	}
	if opts.NominationLimiter == nil {
		opts.NominationLimiter = flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(NominationQPS, NominationBurst, opts.Clock)
	}
	var quota *quotaCache
	if opts.Quota != nil {
		if opts.QuotaTTL <= 0 {
			opts.QuotaTTL = DefaultQuotaTTL
		}
		quota = &quotaCache{reader: opts.Quota, ttl: opts.QuotaTTL}
	}
	return &Provisioner{status: opts.Status, quota: quota, kube: opts.Kube, catalog: opts.Catalog, clusterName: opts.ClusterName,
		maxStuck: opts.MaxStuckReports, nominations: opts.NominationLimiter, clock: opts.Clock, log: opts.Logger, recorder: events.NewRecorder(opts.Kube, opts.Clock),
		offerings: opts.Offerings, stuckAfter: opts.StuckAfter, maxPods: opts.DefaultMaxPods, staticOff: opts.DisableStaticCapacity, overlays: opts.Overlays,
		buffersOff: opts.DisableCapacityBuffers,
		limits:     limitGuard{kube: opts.Kube, namespace: opts.Namespace, clock: opts.Clock, duration: opts.LimitsLeaseDuration},
		names:      claimnames.NewCounter(opts.Kube, opts.Namespace, opts.Clock)}
}

// Result summarises one provisioning pass.
type Result struct {
	PendingPods int
	// Pods says where each pending pod went: exactly one outcome each.
	Pods    Accounting
	Created []string // NodeClaims created by this pass
	// SolveDuration is the engine's time.
	SolveDuration time.Duration
	// RetryAt is when the provisioning pass the Outcome asks for runs
	// (zero: none), after a deferral.
	RetryAt time.Time
	// OverLimit describes NodeClaims not created because a fresh count
	// showed their NodePool's limits taken by a concurrent pass.
	OverLimit []string
	// Launching are the NodeClaims this pass asks lifecycle to launch:
	// those it created and those whose launch stalled (Outcome holds a
	// launch check, due now, for each).
	Launching []string
	// Outcome holds the continuations the pass asks for, for the caller
	// to send: the launch checks, and the next pass (RetryAt).
	Outcome triggers.Outcome
	// EventsNotWritten counts the events the pass left out, by reason and
	// why: Nominated events over the nomination rate limit, stuck-pod
	// reports over MaxStuckReports. The pass logs them in one line.
	EventsNotWritten events.Unwritten
	// Static lists the static NodePools the pass scaled or found short of
	// replicas.
	Static []StaticResult
	// Buffers says what room each CapacityBuffer holds after the pass.
	Buffers []BufferResult
}

// retryDelay is how soon a pass runs again after deferring pods.
const retryDelay = 2 * time.Second

// Provision runs one pass. It returns an error only when something should be
// retried by redelivery (API failures); pods that cannot be placed are
// reported with events, not errors, because retrying would not help them.
// The launch checks and the next pass it asks for are in Result.Outcome,
// also when it returns an error.
//
// Every pending pod gets one outcome in Result.Pods (see Outcome); a pod
// pending longer than StuckAfter gets a FailedScheduling event that says
// where karpfunc placed it and what it waits for.
func (p *Provisioner) Provision(ctx context.Context) (Result, error) {
	started := time.Now()
	// The name counter is read before the NodeClaims are listed: a view
	// taken after another pass retired generations comes with a list that
	// holds the claims it created (see package claimnames).
	view, err := p.names.Read(ctx)
	if err != nil {
		return Result{}, err
	}
	snap, err := snapshot.List(ctx, p.kube)
	if err != nil {
		return Result{}, err
	}
	evacuate(ctx, snap, p.clock.Now()) // Evacuate's nodes; a no-op for an ordinary pass
	unavailable, err := p.loadUnavailable(ctx)
	if err != nil {
		return Result{}, err
	}
	overlays, overlayObjs, err := p.overlays.Resolve(ctx, snap.NodePools, p.catalog)
	if err != nil {
		return Result{}, err
	}
	ps := &pass{started: started}
	cat := unavailable.Apply(p.catalog)
	in := snap.Input(cat, snapshot.Live)
	in.DefaultMaxPods = p.maxPods
	pending := len(in.Pods)
	bufs := p.readBuffers(ctx, ps)
	in.Pods = append(in.Pods, capacitybuffer.AllVirtualPods(bufs)...)
	// Quota is read only when there is something to place: an idle
	// cluster costs ARM nothing.
	if len(in.Pods) > 0 {
		if ps.headroom = p.headroom(ctx, snap, cat); ps.headroom != nil {
			if quotaEntries := ps.headroom.Entries(p.catalog, p.clock.Now().Add(time.Minute)); len(quotaEntries) > 0 {
				ps.quotaSummary = quotaSummary(ps.headroom, p.catalog)
				in.Catalog = unavailable.With(quotaEntries...).Apply(p.catalog)
			}
			in.Quota = schedulerQuota(ps.headroom)
		}
	}
	// Every NodePool plans with its NodeOverlays applied to the catalog
	// the pass decided on (unavailable offerings and quota included).
	in.PoolCatalogs = overlays.Catalogs(in.Catalog)
	ps.res.PendingPods = pending
	recordPending(ctx, pending)
	if err := p.overlays.WriteStatus(ctx, overlayObjs, overlays); err != nil {
		ps.errs = append(ps.errs, err)
	}
	if in.NotReady, err = p.syncStatus(ctx, snap); err != nil {
		ps.errs = append(ps.errs, err)
	}
	p.keepStatic(ctx, ps, snap, &in, view)
	if len(in.Pods) > 0 {
		p.placePending(ctx, ps, snap, in, view)
		p.writeQuotaStatus(ctx, ps, snap)
	}
	if ps.outOfTime != nil {
		return ps.res, ps.outOfTime // the solve's NodeClaims were not created
	}
	p.writeBuffers(ctx, ps, bufs)
	p.askLaunches(ps, snap)
	return p.finishPass(ctx, ps, in.Pods)
}

// pass is what one provisioning pass collects on its way.
type pass struct {
	res  Result
	errs []error
	// retryAfter: schedule another pass after this long (zero: none).
	retryAfter time.Duration
	// started is when the pass began; outOfTime is set when its time ran
	// out before it acted on the solve.
	started   time.Time
	outOfTime error
	// headroom is the quota left for the pass (nil: quota awareness off
	// or the usages unreadable); quotaSummary names the quotas that rule
	// offerings out, "" when none does. quotaBlocked is set when quota
	// left pods without an offering.
	headroom     *offerings.Headroom
	quotaSummary string
	quotaBlocked bool
	// rooms: where each CapacityBuffer's virtual pods went (nil: the pass
	// solved nothing).
	rooms map[string]*capacitybuffer.Room
}

func (ps *pass) wantRetry(d time.Duration) { ps.retryAfter = max(ps.retryAfter, d) }

// placePending solves where the pending pods go, reports the pods and
// NodePools the solver refused, and creates the NodeClaims it decided on.
func (p *Provisioner) placePending(ctx context.Context, ps *pass, snap *snapshot.Cluster, in scheduler.Input, view int64) {
	start := p.clock.Now()
	out := scheduler.Solve(in)
	// Virtual pods hold room; they get no outcome and no event.
	ps.rooms = capacitybuffer.Rooms(out)
	out = capacitybuffer.WithoutVirtual(out)
	ps.res.SolveDuration = p.clock.Since(start)
	recordSolve(ctx, ps.res.SolveDuration)
	ps.res.Pods = PlacedOutcomes(out)
	if err := snapshot.CheckTime(ctx, "solve", ps.started); err != nil {
		ps.outOfTime = err
		return
	}
	for _, inv := range out.InvalidNodePools {
		p.log.Error("nodepool can launch nothing", "nodepool", inv.NodePool.Name, "reason", inv.Reason)
		if err := p.recorder.Publish(ctx, events.Event{Object: inv.NodePool, Type: corev1.EventTypeWarning,
			Reason: events.ReasonNoNodeImage, Message: inv.Reason}); err != nil {
			ps.errs = append(ps.errs, err)
		}
	}
	plans, overQuota := fitQuota(ps.headroom, out.NewNodeClaims)
	for _, plan := range out.NewNodeClaims {
		if short, over := overQuota[plan]; over {
			p.overQuota(ctx, ps, plan, short)
		}
	}
	if len(out.Unschedulable) > 0 && ps.headroom != nil {
		// What quota leaves once the pass's own claims are charged: a
		// pod may be left over because they took the rest.
		ps.quotaSummary = quotaSummary(ps.headroom, p.catalog)
	}
	for _, refused := range out.Unschedulable {
		message := "karpfunc: " + refused.Reason
		if ps.quotaSummary != "" {
			message += "; subscription quota rules out offerings: " + ps.quotaSummary
			ps.quotaBlocked = true
		}
		if err := p.recorder.Publish(ctx, events.Event{Object: refused.Pod, Type: corev1.EventTypeWarning,
			Reason: events.ReasonFailedScheduling, Message: message}); err != nil {
			ps.errs = append(ps.errs, err)
		}
	}
	p.createPlanned(ctx, ps, snap, plans, view)
}

// createPlanned creates the NodeClaims plans ask for, adds them to snap,
// and retires the name generations it created.
func (p *Provisioner) createPlanned(ctx context.Context, ps *pass, snap *snapshot.Cluster, plans []*scheduler.NodeClaimPlan, view int64) {
	// Names held by any NodeClaim, deleting or not: a new claim must not
	// reuse them.
	held := make(map[string]bool, len(snap.NodeClaims))
	for _, nc := range snap.NodeClaims {
		held[nc.Name] = true
	}
	retire := int64(-1) // the highest generation this pass created
	for _, plan := range plans {
		nc, created, err := p.create(ctx, plan, func(name string) bool { return held[name] }, view, nil)
		if err != nil {
			p.notCreated(ctx, ps, plan, err)
			continue
		}
		held[nc.Name] = true
		pods := capacitybuffer.RealPods(plan.Pods)
		for _, pod := range pods {
			ps.res.Pods = append(ps.res.Pods, outcomeOf(pod, OnNew, nc.Name, ""))
		}
		if !created {
			continue
		}
		p.nominate(ctx, nc, pods, &ps.res.EventsNotWritten)
		ps.res.Created = append(ps.res.Created, nc.Name)
		recordCreated(ctx, nc, pods, p.clock.Now())
		snap.NodeClaims = append(snap.NodeClaims, nc)
		if generation, ok := claimnames.GenerationOf(nc); ok && generation > retire {
			retire = generation
		}
	}
	// Created first, retired after: a pass that reads the counter past
	// these generations lists their claims (package claimnames).
	if retire >= 0 {
		if err := p.names.Retire(ctx, retire); err != nil {
			ps.errs = append(ps.errs, err)
		}
	}
}

// notCreated defers the pods of a plan whose NodeClaim was not created.
func (p *Provisioner) notCreated(ctx context.Context, ps *pass, plan *scheduler.NodeClaimPlan, err error) {
	pods := capacitybuffer.RealPods(plan.Pods) // virtual pods get no outcome or event
	deferPods := func(reason string) {
		for _, pod := range pods {
			ps.res.Pods = append(ps.res.Pods, outcomeOf(pod, Deferred, "", reason))
		}
	}
	switch {
	case IsNameRetired(err):
		p.log.Warn("nodeclaim not created", "error", err)
		deferPods("a fresh pass: " + err.Error())
	case IsLimitExceeded(err):
		// Another pass took the room; like the solver's own limit
		// refusals, the pods wait (a termination asks for a pass).
		ps.res.OverLimit = append(ps.res.OverLimit, err.Error())
		p.log.Warn("nodeclaim not created", "error", err)
		deferPods("room in NodePool " + plan.NodePool.Name + ": " + err.Error())
		for _, pod := range pods {
			if eerr := p.recorder.Publish(ctx, events.Event{Object: pod, Type: corev1.EventTypeWarning,
				Reason: events.ReasonFailedScheduling, Message: "karpfunc: " + err.Error()}); eerr != nil {
				ps.errs = append(ps.errs, eerr)
			}
		}
	default:
		ps.errs = append(ps.errs, err)
		deferPods("a NodeClaim for NodePool " + plan.NodePool.Name + ": " + err.Error())
	}
}

// askLaunches asks for a launch check, due now, of every NodeClaim not
// launched yet whose launch has no check coming (lifecycle.LaunchAsk): the
// claims just created and any whose launch stalled. Lifecycle launches
// them; the pass never waits. Another controller's claims count as
// capacity, never launched by us.
func (p *Provisioner) askLaunches(ps *pass, snap *snapshot.Cluster) {
	now := p.clock.Now()
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil || nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() || !ownership.Owns(nc) {
			continue
		}
		if check, ok := lifecycle.LaunchAsk(p.clusterName, nc, now); ok {
			ps.res.Launching = append(ps.res.Launching, nc.Name)
			ps.res.Outcome.Then(check)
		}
	}
}

// finishPass reports pods stuck too long and schedules the next pass when
// one is wanted.
func (p *Provisioner) finishPass(ctx context.Context, ps *pass, pending []*corev1.Pod) (Result, error) {
	if ps.res.Pods.Count(Deferred) > 0 && len(ps.errs) == 0 {
		ps.wantRetry(retryDelay)
	}
	ps.errs = append(ps.errs, p.reportStuck(ctx, ps, pending)...)
	if unwritten := ps.res.EventsNotWritten; len(unwritten) > 0 {
		p.log.Info("events not written", "count", unwritten.Total(), "byReason", unwritten.String())
	}
	if ps.retryAfter > 0 {
		next := triggers.ProvisionPass(p.clusterName, "", p.clock.Now(), ps.retryAfter)
		ps.res.Outcome.Then(next)
		ps.res.RetryAt = next.Due()
	}
	return ps.res, errors.Join(ps.errs...)
}

// reportStuck writes a FailedScheduling event on each pod that has been
// pending longer than a launch takes (StuckAfter) although this pass placed
// it: saying where it was placed and what it waits for, so a pod never
// waits without a word. Unschedulable pods have their event already.
//
// As Karpenter's PodFailedToScheduleEvent, a pod is reported once per
// StuckDedupeTimeout. A pass asks the API server about at most
// MaxStuckReports pods, oldest pending first; pods this instance reported
// within the window cost nothing and are passed over, so later passes
// reach the rest in turn. Those left are counted in EventsNotWritten.
func (p *Provisioner) reportStuck(ctx context.Context, ps *pass, pending []*corev1.Pod) []error {
	byName := make(map[types.NamespacedName]*corev1.Pod, len(pending))
	for _, pod := range pending {
		byName[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = pod
	}
	now := p.clock.Now()
	var errs []error
	budget := p.maxStuck
	left := 0
	for _, outcome := range p.stuck(ps.res.Pods, now) {
		pod := byName[outcome.Pod]
		if pod == nil {
			continue // every outcome is of a pending pod
		}
		waited := now.Sub(outcome.PendingSince)
		ev := events.Event{Object: pod, Type: corev1.EventTypeWarning, Reason: events.ReasonFailedScheduling,
			Message: "karpfunc: " + stuckMessage(outcome, waited), DedupeValues: []string{string(pod.UID)},
			DedupeTimeout: StuckDedupeTimeout}
		if budget == 0 {
			if !p.recorder.Remembers(ev) {
				left++
			}
			continue
		}
		done, err := p.recorder.Record(ctx, ev)
		if err != nil {
			errs = append(errs, err)
		}
		if done.Requested() || err != nil {
			budget--
		}
	}
	ps.res.EventsNotWritten.Add(events.ReasonFailedScheduling,
		fmt.Sprintf("at most %d stuck-pod reports a pass, oldest pending first; later passes report the rest", p.maxStuck), left)
	return errs
}

// stuck returns the placed pods pending longer than StuckAfter, oldest
// pending first.
func (p *Provisioner) stuck(outcomes Accounting, now time.Time) Accounting {
	var stuck Accounting
	for _, outcome := range outcomes {
		if outcome.Outcome != Unschedulable && now.Sub(outcome.PendingSince) >= p.stuckAfter {
			stuck = append(stuck, outcome)
		}
	}
	slices.SortStableFunc(stuck, func(a, b PodOutcome) int { return a.PendingSince.Compare(b.PendingSince) })
	return stuck
}

// stuckMessage says where a stuck pod was placed and what it waits for.
func stuckMessage(outcome PodOutcome, waited time.Duration) string {
	waitedFor := waited.Round(time.Second)
	switch outcome.Outcome {
	case OnNode:
		return fmt.Sprintf("pending for %s although node %s has room for it; waiting for kube-scheduler to bind it", waitedFor, outcome.Target)
	case OnInFlight:
		return fmt.Sprintf("pending for %s; waiting for nodeclaim/%s to launch and register", waitedFor, outcome.Target)
	case OnNew:
		return fmt.Sprintf("pending for %s; nodeclaim/%s was created for it", waitedFor, outcome.Target)
	default:
		return fmt.Sprintf("pending for %s; waiting for %s", waitedFor, outcome.Reason)
	}
}

func (p *Provisioner) loadUnavailable(ctx context.Context) (*offerings.Set, error) {
	if p.offerings == nil {
		return &offerings.Set{}, nil
	}
	return p.offerings.Load(ctx)
}

// IsProvisionable reports whether a pod is waiting for capacity: not bound,
// not terminating, not a DaemonSet pod (those follow their nodes), and marked
// Unschedulable by kube-scheduler — the same test Karpenter applies.
func IsProvisionable(pod *corev1.Pod) bool {
	return snapshot.Provisionable(pod, snapshot.Live)
}

// syncStatus writes NodePool and AKSNodeClass status from snap (when the
// Provisioner keeps status) and returns the NodePools not Ready, and why.
// A failed write does not stop the pass: the readiness it computed holds.
func (p *Provisioner) syncStatus(ctx context.Context, snap *snapshot.Cluster) (map[string]string, error) {
	if p.status == nil {
		return nil, nil
	}
	synced, err := nodepoolstatus.Sync(ctx, p.kube, nodepoolstatus.Objects{NodePools: snap.NodePools,
		NodeClasses: snap.NodeClasses, NodeClaims: snap.NodeClaims}, *p.status, p.clock)
	for name, why := range synced.NotReady {
		p.log.Warn("ignoring nodepool, not ready", "nodepool", name, "reason", why)
	}
	return synced.NotReady, err
}
