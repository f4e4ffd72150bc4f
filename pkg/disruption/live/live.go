// Package live carries pkg/disruption's decisions out on a running cluster:
// the Disruption function's controller.
//
// A pass reads the one cluster snapshot, finishes a command in flight,
// writes every NodeClaim's disruption conditions, deletes expired
// NodeClaims, explains every node it leaves alone (events), and starts at
// most one command; it schedules the next pass for the earliest deadline
// (consolidateAfter, expireAfter, do-not-disrupt) as a Service Bus message.
//
// Invariants:
//   - One command at a time per cluster: no command starts while a
//     replacement of an earlier one is on its way (the Disruption queue's
//     sessions serialize the passes themselves).
//   - Emptiness and consolidation act only after a validation message,
//     ValidationDelay later, re-checks the command on a fresh snapshot; drift
//     acts at once, as in Karpenter.
//   - Replacement first: a candidate is tainted and deleted only once every
//     replacement of its command is Initialized. Until then the candidates
//     are untouched, so a replacement that fails leaves the cluster as it was.
//   - Nodes leave through the termination path (pkg/lifecycle Terminate,
//     via the NodeClaim's deletion), which evicts through the Eviction API:
//     PodDisruptionBudgets hold.
//   - State lives in the cluster (annotations on the replacements), never
//     in the process: any pass, on any instance, can finish a command.
package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Annotations on a replacement NodeClaim tie it to its command.
const (
	// AnnotationCommand is the command's id (a hash of its method and
	// candidates' UIDs).
	AnnotationCommand = "karpfunc.azure.com/disruption-command"
	// AnnotationCandidates lists the candidates, "name=uid,...".
	AnnotationCandidates = "karpfunc.azure.com/disruption-candidates"
	// AnnotationReplacements is how many replacements the command has.
	AnnotationReplacements = "karpfunc.azure.com/disruption-replacements"
	// AnnotationReason is the command's disruption reason.
	AnnotationReason = "karpfunc.azure.com/disruption-reason"
	// AnnotationMethod is the command's method (its events name a
	// rebalancing consolidation as such).
	AnnotationMethod = "karpfunc.azure.com/disruption-method"
	// AnnotationValidating, on a command's candidates, is when the
	// command's validation is due (RFC 3339). Until then, and
	// validationGrace after, passes start no other command: Karpenter
	// holds one command through its validation.
	AnnotationValidating = "karpfunc.azure.com/disruption-validating"
)

// validationGrace is how long after its due time a validation still holds
// other commands back; past it the validation message is taken as lost.
const validationGrace = time.Minute

// Defaults.
const (
	// DefaultReplacementCheck is how often a command waiting for its
	// replacements looks again when no event (the replacement's
	// initialization) came first.
	DefaultReplacementCheck = 30 * time.Second
	// TriggerSlot groups triggers: every "look again" of one slot is one
	// message.
	TriggerSlot = 5 * time.Second
)

// Replacer creates and launches a replacement NodeClaim;
// *provisioning.Provisioner implements it.
type Replacer interface {
	Replace(ctx context.Context, plan *scheduler.NodeClaimPlan, annotations map[string]string) (*karpv1.NodeClaim, error)
}

// Options configure a Controller.
type Options struct {
	Kube     client.Client
	Catalog  *catalog.Catalog
	Replacer Replacer
	// Publisher sends the scheduled messages (validation, deadlines,
	// replacement checks); required.
	Publisher   bus.Publisher
	ClusterName string
	Clock       clock.Clock
	Logger      *slog.Logger
	// Engine tunes decisions (SpotToSpot, TimeLimit).
	Engine disruption.Options
	// ValidationDelay (default disruption.ValidationDelay).
	ValidationDelay time.Duration
	// ReplacementCheck (default DefaultReplacementCheck).
	ReplacementCheck time.Duration
	// Decisions records each NodeClaim taken away (default: logged with
	// Logger).
	Decisions *decisions.Recorder
	// Status, when set, makes every pass write NodePool and AKSNodeClass
	// status (nodepoolstatus.Sync): the relay asks for a pass when one of
	// them is created, changed or deleted. A NodePool that became Ready
	// gets a provisioning pass for the pods it can now take. nil: none.
	Status *nodepoolstatus.ClassOptions
	// Versions says which node image and Kubernetes versions nodes should
	// run (nil: no image or Kubernetes version drift).
	Versions VersionSource
}

// VersionSource says which versions nodes should run now, for the
// NodeClaims of a snapshot. A version it cannot tell is left out of the
// answer (that check is skipped); the error explains what was left out.
type VersionSource interface {
	Versions(ctx context.Context, claims []*karpv1.NodeClaim) (disruption.Versions, error)
}

// Controller runs disruption passes.
type Controller struct {
	opts     Options
	kube     client.Client
	clock    clock.Clock
	log      *slog.Logger
	recorder *events.Recorder
}

// ExplainEvery is how often an Unconsolidatable explanation of one node is
// written again (Karpenter's DedupeTimeout for it).
const ExplainEvery = 15 * time.Minute

// New returns a Controller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ValidationDelay <= 0 {
		opts.ValidationDelay = disruption.ValidationDelay
	}
	if opts.ReplacementCheck <= 0 {
		opts.ReplacementCheck = DefaultReplacementCheck
	}
	if opts.Decisions == nil {
		opts.Decisions = decisions.NewRecorder(opts.Logger)
	}
	return &Controller{opts: opts, kube: opts.Kube, clock: opts.Clock, log: opts.Logger, recorder: events.NewRecorder(opts.Kube, opts.Clock)}
}

// Result says what a pass or a validation did.
type Result struct {
	// Decided is the command the engine chose ("" none).
	Decided string
	// Validating: the command waits for its validation message, at this time.
	ValidateAt time.Time
	// Invalid is why a validated command was dropped.
	Invalid string
	// Replacing are replacement NodeClaims launched by this call.
	Replacing []string
	// Disrupted are candidates deleted by this call (their command's reason
	// in Reasons).
	Disrupted []string
	// Expired are NodeClaims deleted past expireAfter.
	Expired []string
	// InFlight names a command waiting for its replacements.
	InFlight string
	// Refused counts nodes left alone, by event reason.
	Refused map[string]int
	// BudgetErrors are budgets that could not be read.
	BudgetErrors []string
	// Next is when the next pass is scheduled (zero: none).
	Next time.Time
}

// PodEvents are pod events the relay saw on nodes (a pod bound, deleted,
// finished), up to At.
type PodEvents struct {
	Nodes []string
	At    time.Time
}

// Pass runs one disruption pass; ev moves the named nodes' NodeClaims'
// status.lastPodEventTime first (Karpenter's pod events: consolidateAfter
// restarts).
func (c *Controller) Pass(ctx context.Context, ev PodEvents) (Result, error) {
	res := Result{Refused: map[string]int{}}
	snap, err := snapshot.List(ctx, c.kube)
	if err != nil {
		return res, err
	}
	now := c.clock.Now()
	var errs []error
	errs = append(errs, c.notePodEvents(ctx, snap, ev)...)
	errs = append(errs, c.syncStatus(ctx, snap)...)
	inFlight, finished, err := c.resume(ctx, snap, now)
	res.Disrupted = append(res.Disrupted, finished...)
	if err != nil {
		errs = append(errs, err)
	}
	if len(finished) > 0 {
		// The candidates just went: decide on what the cluster is now.
		if snap, err = snapshot.List(ctx, c.kube); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
	}
	st := c.state(ctx, snap, now)
	d := disruption.Decide(st)
	errs = append(errs, c.writeConditions(ctx, snap, st.Versions, now)...)
	for _, nc := range d.Expired {
		if err := c.disrupt(ctx, snap, nc, string(disruption.ReasonExpired), "", nil, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Expired = append(res.Expired, nc.Name)
	}
	errs = append(errs, c.budgetErrors(ctx, snap, d.BudgetErrors, &res)...)
	errs = append(errs, c.explain(ctx, snap, d.Refusals, res.Refused)...)
	// Deadlines land on slot boundaries (at most TriggerSlot late): nodes
	// that become consolidatable within one slot share one pass.
	next := d.Next
	if !next.IsZero() {
		next = triggers.Due(next, TriggerSlot)
	}
	if inFlight == "" {
		inFlight = draining(snap)
	}
	switch pending := validating(snap, now); {
	case inFlight != "":
		res.InFlight = inFlight
		next = earliest(next, triggers.Due(now, c.opts.ReplacementCheck))
	case pending != "":
		// The validation decides, and asks for the next pass when it acts.
		res.InFlight = pending
	case d.Command != nil:
		res.Decided = d.Command.String()
		if d.Command.Reason == disruption.ReasonDrifted {
			// Drift does not wait for validation (Karpenter's order).
			r, err := c.execute(ctx, snap, d.Command, now)
			res.Replacing, res.Disrupted = append(res.Replacing, r.Replacing...), append(res.Disrupted, r.Disrupted...)
			if err != nil {
				errs = append(errs, err)
			}
			if len(r.Replacing) > 0 {
				next = earliest(next, triggers.Due(now, c.opts.ReplacementCheck))
			} else {
				next = earliest(next, triggers.Due(now, TriggerSlot))
			}
			break
		}
		at, err := c.scheduleValidation(ctx, d.Command, now)
		if err != nil {
			errs = append(errs, err)
		}
		res.ValidateAt = at
	}
	if len(res.Expired) > 0 {
		next = earliest(next, triggers.Due(now, TriggerSlot))
	}
	if !next.IsZero() {
		if err := c.schedulePass(ctx, "deadline", next); err != nil {
			errs = append(errs, err)
		} else {
			res.Next = next
		}
	}
	return res, errors.Join(errs...)
}

// state is what the engine decides from; versions that cannot be resolved
// now are logged and left out (their drift check waits for a later pass).
func (c *Controller) state(ctx context.Context, snap *snapshot.Cluster, now time.Time) disruption.State {
	st := disruption.State{Cluster: snap, Catalog: c.opts.Catalog, Now: now, Options: c.opts.Engine}
	if c.opts.Versions == nil {
		return st
	}
	v, err := c.opts.Versions.Versions(ctx, snap.NodeClaims)
	if err != nil {
		c.log.Warn("node versions not fully resolved; their drift checks wait", "error", err)
	}
	st.Versions = v
	return st
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Validate re-checks a command decided ValidationDelay ago and carries it
// out if it still holds.
func (c *Controller) Validate(ctx context.Context, msg messages.DisruptionCommand) (Result, error) {
	res := Result{Refused: map[string]int{}}
	snap, err := snapshot.List(ctx, c.kube)
	if err != nil {
		return res, err
	}
	// Whatever the outcome, the command no longer holds others back.
	var candidates []*karpv1.NodeClaim
	for _, ref := range msg.Candidates {
		for _, nc := range snap.NodeClaims {
			if nc.Name == ref.Name && string(nc.UID) == ref.UID {
				candidates = append(candidates, nc)
			}
		}
	}
	if err := c.markValidating(ctx, candidates, ""); err != nil {
		return res, err
	}
	now := c.clock.Now()
	if inFlight := c.inFlight(snap); inFlight != "" {
		res.Invalid, res.InFlight = "command "+inFlight+" is still waiting for its replacements", inFlight
		return res, nil
	}
	cmd := &disruption.Command{Method: msg.Method, Reason: disruption.Reason(msg.Reason), Savings: msg.SavingsPerHour}
	for _, ref := range msg.Candidates {
		cmd.Candidates = append(cmd.Candidates, &disruption.Candidate{NodeClaim: &karpv1.NodeClaim{}})
		last := cmd.Candidates[len(cmd.Candidates)-1].NodeClaim
		last.Name, last.UID = ref.Name, types.UID(ref.UID)
	}
	for _, names := range msg.Replacements {
		plan := &scheduler.NodeClaimPlan{}
		for _, n := range names {
			if it, ok := c.opts.Catalog.Get(n); ok {
				plan.InstanceTypes = append(plan.InstanceTypes, it)
			}
		}
		cmd.Replacements = append(cmd.Replacements, plan)
	}
	fresh, err := disruption.Validate(c.state(ctx, snap, now), cmd)
	var verr *disruption.ValidationError
	if errors.As(err, &verr) {
		res.Invalid = verr.Reason
		// No pass is scheduled for it: what changed the answer was an
		// event, which asks for its own pass (a re-decision here could
		// loop at idle between two views of the same cluster).
		c.log.Info("disruption command abandoned after validation", "method", msg.Method, "reason", msg.Reason, "why", verr.Reason)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	res.Decided = fresh.String()
	r, err := c.execute(ctx, snap, fresh, now)
	res.Replacing, res.Disrupted = r.Replacing, r.Disrupted
	if err != nil {
		return res, err
	}
	next := triggers.Due(now, TriggerSlot)
	if len(r.Replacing) > 0 {
		next = triggers.Due(now, c.opts.ReplacementCheck)
	}
	return res, c.schedulePass(ctx, "executed", next)
}

// CommandID identifies a command by its method and candidates.
func CommandID(method string, candidates []types.UID) string {
	ids := make([]string, len(candidates))
	for i, u := range candidates {
		ids[i] = string(u)
	}
	sort.Strings(ids)
	sum := sha256.Sum256([]byte(method + "\x00" + strings.Join(ids, ",")))
	return hex.EncodeToString(sum[:])[:16]
}

func commandID(cmd *disruption.Command) string {
	uids := make([]types.UID, len(cmd.Candidates))
	for i, cand := range cmd.Candidates {
		uids[i] = cand.NodeClaim.UID
	}
	return CommandID(cmd.Method, uids)
}

func (c *Controller) scheduleValidation(ctx context.Context, cmd *disruption.Command, now time.Time) (time.Time, error) {
	msg := messages.DisruptionCommand{Cluster: c.opts.ClusterName, Method: cmd.Method, Reason: string(cmd.Reason), DecidedAt: now.UTC(),
		SavingsPerHour: cmd.Savings}
	for _, cand := range cmd.Candidates {
		msg.Candidates = append(msg.Candidates, messages.ObjectRef{Name: cand.Name(), UID: string(cand.NodeClaim.UID)})
	}
	for _, r := range cmd.Replacements {
		names := make([]string, 0, len(r.InstanceTypes))
		for _, it := range r.InstanceTypes {
			names = append(names, it.Name)
		}
		msg.Replacements = append(msg.Replacements, names)
	}
	// One validation per command per slot: two passes that decide the
	// same command collapse into one.
	validation := triggers.DisruptionValidate(msg, commandID(cmd), now, c.opts.ValidationDelay)
	at := validation.Due()
	if err := triggers.Publish(ctx, c.opts.Publisher, validation); err != nil {
		return time.Time{}, fmt.Errorf("scheduling the validation of %s: %w", cmd, err)
	}
	candidates := make([]*karpv1.NodeClaim, len(cmd.Candidates))
	for i, cand := range cmd.Candidates {
		candidates[i] = cand.NodeClaim
	}
	return at, c.markValidating(ctx, candidates, at.UTC().Format(time.RFC3339))
}

// markValidating sets AnnotationValidating to at on the candidates, or
// removes it when at is "".
func (c *Controller) markValidating(ctx context.Context, candidates []*karpv1.NodeClaim, at string) error {
	var errs []error
	for _, nc := range candidates {
		if nc.Annotations[AnnotationValidating] == at {
			continue
		}
		patch := client.MergeFrom(nc.DeepCopy())
		marked := nc.DeepCopy()
		if at == "" {
			delete(marked.Annotations, AnnotationValidating)
		} else {
			if marked.Annotations == nil {
				marked.Annotations = map[string]string{}
			}
			marked.Annotations[AnnotationValidating] = at
		}
		if err := c.kube.Patch(ctx, marked, patch); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("marking NodeClaim %s as awaiting validation: %w", nc.Name, err))
		}
	}
	return errors.Join(errs...)
}

// validating names a command awaiting its validation: a NodeClaim marked
// AnnotationValidating with a due time less than validationGrace ago.
func validating(snap *snapshot.Cluster, now time.Time) string {
	for _, nc := range snap.NodeClaims {
		at, err := time.Parse(time.RFC3339, nc.Annotations[AnnotationValidating])
		if err != nil || nc.DeletionTimestamp != nil || !now.Before(at.Add(validationGrace)) {
			continue
		}
		return fmt.Sprintf("validation of %s at %s", nc.Name, at.Format(time.RFC3339))
	}
	return ""
}

func (c *Controller) schedulePass(ctx context.Context, cause string, at time.Time) error {
	if err := triggers.Publish(ctx, c.opts.Publisher, triggers.DisruptionPass(c.opts.ClusterName, cause, at)); err != nil {
		return fmt.Errorf("scheduling a disruption pass at %s: %w", at.Format(time.RFC3339), err)
	}
	return nil
}

// execute carries out a command: a delete at once, a replace by launching
// its replacements (the candidates go when they are Initialized, see
// resume).
func (c *Controller) execute(ctx context.Context, snap *snapshot.Cluster, cmd *disruption.Command, now time.Time) (Result, error) {
	var res Result
	if len(cmd.Replacements) == 0 {
		var errs []error
		for _, cand := range cmd.Candidates {
			if err := c.disrupt(ctx, snap, cand.NodeClaim, string(cmd.Reason), cmd.Method, nil, cmd.Savings/float64(len(cmd.Candidates))); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Disrupted = append(res.Disrupted, cand.Name())
		}
		return res, errors.Join(errs...)
	}
	id := commandID(cmd)
	refs := make([]string, len(cmd.Candidates))
	for i, cand := range cmd.Candidates {
		refs[i] = cand.Name() + "=" + string(cand.NodeClaim.UID)
	}
	ann := map[string]string{
		AnnotationCommand: id, AnnotationCandidates: strings.Join(refs, ","),
		AnnotationReplacements: strconv.Itoa(len(cmd.Replacements)), AnnotationReason: string(cmd.Reason),
		AnnotationMethod: cmd.Method,
	}
	existing := 0
	for _, nc := range snap.NodeClaims {
		if nc.Annotations[AnnotationCommand] == id && nc.DeletionTimestamp == nil {
			existing++
		}
	}
	var errs []error
	for _, plan := range cmd.Replacements[min(existing, len(cmd.Replacements)):] {
		nc, err := c.opts.Replacer.Replace(ctx, plan, ann)
		if nc != nil {
			res.Replacing = append(res.Replacing, nc.Name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("launching a replacement for %s: %w", cmd, err))
			continue
		}
		c.log.Info("disruption replacement launched", "command", cmd.String(), "replacement", nc.Name)
	}
	for _, cand := range cmd.Candidates {
		c.event(ctx, cand.NodeClaim, corev1.EventTypeNormal, events.ReasonDisruptionLaunching,
			fmt.Sprintf("Launching NodeClaim: %s (replacing it: %s)", eventReason(string(cmd.Reason), cmd.Method), strings.Join(res.Replacing, ", ")))
	}
	return res, errors.Join(errs...)
}

// inFlight names a command whose replacements are on their way.
func (c *Controller) inFlight(snap *snapshot.Cluster) string {
	for _, nc := range snap.NodeClaims {
		if id := nc.Annotations[AnnotationCommand]; id != "" && nc.DeletionTimestamp == nil {
			return id
		}
	}
	return ""
}

// notePodEvents moves lastPodEventTime forward on the NodeClaims of the
// nodes named (never backward: events arrive out of order).
func (c *Controller) notePodEvents(ctx context.Context, snap *snapshot.Cluster, ev PodEvents) []error {
	if len(ev.Nodes) == 0 || ev.At.IsZero() {
		return nil
	}
	named := make(map[string]bool, len(ev.Nodes))
	for _, n := range ev.Nodes {
		named[n] = true
	}
	var errs []error
	for _, nc := range snap.NodeClaims {
		if !named[nc.Status.NodeName] || nc.DeletionTimestamp != nil || !ownership.Owns(nc) || !nc.Status.LastPodEventTime.Time.Before(ev.At) {
			continue
		}
		_, _, err := lifecycle.WriteNodeClaimStatus(ctx, c.kube, nc, func(cur *karpv1.NodeClaim) bool {
			if cur.DeletionTimestamp != nil || !cur.Status.LastPodEventTime.Time.Before(ev.At) {
				return false
			}
			cur.Status.LastPodEventTime = metav1.NewTime(ev.At)
			return true
		})
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("writing lastPodEventTime of NodeClaim %s: %w", nc.Name, err))
		}
	}
	return errs
}

// draining names a NodeClaim being deleted whose node still has pods that
// must go elsewhere: until they have, capacity is in motion (an empty
// replacement is not empty for long) and no new command starts.
func draining(snap *snapshot.Cluster) string {
	leaving := map[string]string{}
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil && nc.Status.NodeName != "" {
			leaving[nc.Status.NodeName] = nc.Name
		}
	}
	if len(leaving) == 0 {
		return ""
	}
	for _, p := range snap.Pods {
		name, ok := leaving[p.Spec.NodeName]
		if !ok || p.DeletionTimestamp != nil || snapshot.Finished(p) || snapshot.OwnedByDaemonSet(p) {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		return "drain of " + name
	}
	return ""
}

// resume finishes commands whose replacements are all Initialized:
// taint and delete the candidates, then drop the annotations. A command
// with a replacement gone (launch failed, liveness deleted it) is
// abandoned, its candidates untouched. It returns a command still waiting.
func (c *Controller) resume(ctx context.Context, snap *snapshot.Cluster, now time.Time) (string, []string, error) {
	byCmd := map[string][]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		if id := nc.Annotations[AnnotationCommand]; id != "" {
			byCmd[id] = append(byCmd[id], nc)
		}
	}
	waiting := ""
	var disrupted []string
	var errs []error
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for k := range byCmd {
			if !yield(k) {
				return
			}
		}
	}) {
		reps := byCmd[id]
		want, _ := strconv.Atoi(reps[0].Annotations[AnnotationReplacements])
		live, ready := 0, 0
		for _, r := range reps {
			if r.DeletionTimestamp != nil {
				continue
			}
			live++
			if r.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
				ready++
			}
		}
		switch {
		case live < max(want, 1):
			// A replacement failed: the command is abandoned, the
			// candidates stay; the next decision starts afresh.
			c.log.Info("disruption command abandoned: a replacement is gone", "command", id, "want", want, "live", live)
			for _, r := range reps {
				errs = append(errs, c.unmark(ctx, r))
			}
			continue
		case ready < live:
			waiting = id
			continue
		}
		reason, method := reps[0].Annotations[AnnotationReason], reps[0].Annotations[AnnotationMethod]
		var names []string
		for _, ref := range strings.Split(reps[0].Annotations[AnnotationCandidates], ",") {
			name, uid, _ := strings.Cut(ref, "=")
			nc := findClaim(snap, name)
			if nc == nil || string(nc.UID) != uid || nc.DeletionTimestamp != nil {
				continue // gone already (another pass, expiry, a user)
			}
			replacing := make([]string, len(reps))
			for i, r := range reps {
				replacing[i] = r.Name
			}
			if err := c.disrupt(ctx, snap, nc, reason, method, replacing, 0); err != nil {
				errs = append(errs, err)
				continue
			}
			names = append(names, name)
		}
		disrupted = append(disrupted, names...)
		for _, r := range reps {
			errs = append(errs, c.unmark(ctx, r))
		}
	}
	return waiting, disrupted, errors.Join(errs...)
}

func findClaim(snap *snapshot.Cluster, name string) *karpv1.NodeClaim {
	for _, nc := range snap.NodeClaims {
		if nc.Name == name {
			return nc
		}
	}
	return nil
}

func nodeOf(snap *snapshot.Cluster, nc *karpv1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName == "" {
		return nil
	}
	for _, n := range snap.Nodes {
		if n.Name == nc.Status.NodeName {
			return n
		}
	}
	return nil
}

// unmark drops a replacement's command annotations: it is an ordinary
// node from now on.
func (c *Controller) unmark(ctx context.Context, nc *karpv1.NodeClaim) error {
	patch := client.MergeFrom(nc.DeepCopy())
	for _, k := range []string{AnnotationCommand, AnnotationCandidates, AnnotationReplacements, AnnotationReason, AnnotationMethod} {
		delete(nc.Annotations, k)
	}
	if err := c.kube.Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("clearing the disruption annotations of NodeClaim %s: %w", nc.Name, err)
	}
	return nil
}

// disrupt takes one NodeClaim away for reason: the disrupted taint on its
// Node, the DisruptionReason condition, DisruptionTerminating events, and
// the deletion (UID-guarded), which the termination path drains.
func (c *Controller) disrupt(ctx context.Context, snap *snapshot.Cluster, nc *karpv1.NodeClaim, reason, method string, replacements []string, savings float64) error {
	if !ownership.Owns(nc) {
		return nil
	}
	node := nodeOf(snap, nc)
	if node != nil && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey }) {
		patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
		node.Spec.Taints = append(node.Spec.Taints, disruption.DisruptedTaint)
		if err := c.kube.Patch(ctx, node, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("tainting node %s for disruption: %w", node.Name, err)
		}
	}
	if _, _, err := lifecycle.WriteNodeClaimStatus(ctx, c.kube, nc, func(cur *karpv1.NodeClaim) bool {
		return cur.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDisruptionReason, reason, "Disrupted: "+reason)
	}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the DisruptionReason of NodeClaim %s: %w", nc.Name, err)
	}
	if node != nil {
		c.event(ctx, node, corev1.EventTypeNormal, events.ReasonDisruptionTerminating, "Disrupting Node: "+eventReason(reason, method))
	}
	c.event(ctx, nc, corev1.EventTypeNormal, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: "+eventReason(reason, method))
	uid := nc.UID
	if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeClaim %s (%s): %w", nc.Name, reason, err)
	}
	// The relay announces the deletion too, under the same MessageId:
	// whichever arrives first starts the drain, the other is dropped.
	if err := triggers.Publish(ctx, c.opts.Publisher, triggers.NodeClaimDeleting(c.opts.ClusterName, nc.Name, string(uid), c.clock.Now())); err != nil {
		c.log.Warn("announcing the deletion to Lifecycle (the relay will)", "nodeclaim", nc.Name, "error", err)
	}
	c.log.Info("disrupted nodeclaim", "nodeclaim", nc.Name, "reason", reason)
	c.recordDisrupted(ctx, snap, nc, node, reason, replacements, savings)
	return nil
}

// eventReason is the reason as events show it: Karpenter's, plus the
// method for a rebalancing consolidation (which Karpenter does not have).
func eventReason(reason, method string) string {
	if method == disruption.MethodRebalance {
		return reason + ", " + method
	}
	return reason
}

func (c *Controller) catalogType(name string) (*catalog.InstanceType, bool) {
	if c.opts.Catalog == nil {
		return nil, false
	}
	return c.opts.Catalog.Get(name)
}

// recordDisrupted counts the disruption (karpenter_nodeclaims_disrupted_total)
// and writes its decision record: what went, at what price, with which pods.
func (c *Controller) recordDisrupted(ctx context.Context, snap *snapshot.Cluster, nc *karpv1.NodeClaim, node *corev1.Node, reason string, replacements []string, savings float64) {
	lifecycle.RecordDisrupted(ctx, nc, reason)
	r := decisions.Record{Decision: decisions.Consolidation, Cluster: c.opts.ClusterName,
		NodePool: nc.Labels[karpv1.NodePoolLabelKey], NodeClaim: nc.Name,
		Size: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
		CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey], Reason: reason,
		Replacements: replacements, SavingsPerHour: savings, Pods: []string{}}
	if reason == string(disruption.ReasonExpired) || reason == string(disruption.ReasonDrifted) {
		r.Decision = decisions.Disruption
	}
	if it, ok := c.catalogType(r.Size); ok {
		for _, o := range it.Offerings {
			if o.Zone == r.Zone && o.CapacityType == r.CapacityType {
				r.PricePerHour = o.Price
			}
		}
	}
	if node != nil {
		for _, p := range snap.Pods {
			if p.Spec.NodeName == node.Name {
				r.Pods = append(r.Pods, p.Namespace+"/"+p.Name)
			}
		}
	}
	c.opts.Decisions.Record(ctx, r)
}

// writeConditions keeps every NodeClaim's Consolidatable and Drifted
// conditions true to the engine's view; it writes only what changed.
func (c *Controller) writeConditions(ctx context.Context, snap *snapshot.Cluster, versions disruption.Versions, now time.Time) []error {
	pools := map[string]*karpv1.NodePool{}
	for _, np := range snap.NodePools {
		pools[np.Name] = np
	}
	hashes := map[string]string{}
	for _, class := range snap.NodeClasses {
		hashes[class.Name] = disruption.NodeClassHash(class)
	}
	nodes := make(map[string]*corev1.Node, len(snap.Nodes))
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
	}
	var errs []error
	for _, nc := range snap.NodeClaims {
		np := pools[nc.Labels[karpv1.NodePoolLabelKey]]
		if np == nil || nc.DeletionTimestamp != nil || !ownership.Owns(nc) {
			continue
		}
		_, _, err := lifecycle.WriteNodeClaimStatus(ctx, c.kube, nc, func(cur *karpv1.NodeClaim) bool {
			return cur.DeletionTimestamp == nil && syncConditions(cur, nodes[cur.Status.NodeName], np, hashes, versions, now)
		})
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("writing the disruption conditions of NodeClaim %s: %w", nc.Name, err))
		}
	}
	return errs
}

// syncConditions sets nc's Consolidatable and Drifted conditions to the
// engine's view of it; false when they already say so.
func syncConditions(nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, hashes map[string]string, versions disruption.Versions, now time.Time) bool {
	want := disruption.Conditions(nc, node, np, hashes, versions, now)
	conds := nc.StatusConditions()
	changed := false
	if conds.Get(karpv1.ConditionTypeInitialized).IsTrue() {
		cur := conds.Get(karpv1.ConditionTypeConsolidatable)
		if want.Consolidatable && (cur == nil || !cur.IsTrue()) {
			changed = conds.SetTrue(karpv1.ConditionTypeConsolidatable) || changed
		}
		if !want.Consolidatable && (cur == nil || cur.IsTrue()) {
			msg := "consolidateAfter is Never"
			if !want.ConsolidatableAt.IsZero() {
				msg = "consolidatable at " + want.ConsolidatableAt.UTC().Format(time.RFC3339)
			}
			changed = conds.SetFalse(karpv1.ConditionTypeConsolidatable, "NotConsolidatable", msg) || changed
		}
	}
	cur := conds.Get(karpv1.ConditionTypeDrifted)
	switch {
	case want.Drifted != "" && (cur == nil || !cur.IsTrue() || cur.Message != want.Drifted):
		reason, _, _ := strings.Cut(want.Drifted, ":")
		changed = conds.SetTrueWithReason(karpv1.ConditionTypeDrifted, reason, want.Drifted) || changed
	case want.Drifted == "" && cur != nil:
		changed = conds.Clear(karpv1.ConditionTypeDrifted) == nil || changed
	}
	return changed
}

// explain writes one event per node left alone, on its Node and NodeClaim:
// DisruptionBlocked for a reason on the node itself, Unconsolidatable when
// consolidation found nothing better. As Karpenter's (pkg/controllers/
// disruption/events: Unconsolidatable and Blocked deduplicate on the
// object's UID, Unconsolidatable for 15 minutes), the same reason on the
// same object is written once per window, whatever its message says (it
// may carry a time), so a fleet at rest costs no writes.
func (c *Controller) explain(ctx context.Context, snap *snapshot.Cluster, refusals []disruption.Refusal, counts map[string]int) []error {
	for _, r := range refusals {
		nc := findClaim(snap, r.NodeClaim)
		if nc == nil || !ownership.Owns(nc) {
			continue
		}
		ev := events.Event{Type: corev1.EventTypeNormal, Reason: events.ReasonUnconsolidatable, Message: r.Reason, DedupeTimeout: ExplainEvery}
		if r.Blocked {
			ev.Reason, ev.DedupeTimeout = events.ReasonDisruptionBlocked, 0
		}
		counts[ev.Reason]++
		if node := nodeOf(snap, nc); node != nil {
			ev.Object, ev.DedupeValues = node, []string{string(node.UID)}
			c.publish(ctx, ev)
		}
		ev.Object, ev.DedupeValues = nc, []string{string(nc.UID)}
		c.publish(ctx, ev)
	}
	return nil
}

// budgetErrors reports budgets that cannot be read: a Warning event on the
// NodePool naming the budget and what is wrong; the NodePool is not
// disrupted on their account (the engine allows it nothing).
func (c *Controller) budgetErrors(ctx context.Context, snap *snapshot.Cluster, errs []error, res *Result) []error {
	for _, err := range errs {
		res.BudgetErrors = append(res.BudgetErrors, err.Error())
		var be *disruption.BudgetError
		if !errors.As(err, &be) {
			continue
		}
		for _, np := range snap.NodePools {
			if np.Name == be.NodePool {
				c.event(ctx, np, corev1.EventTypeWarning, events.ReasonDisruptionBlocked,
					"No disruptions for NodePool "+np.Name+" until its budgets are fixed: "+err.Error())
			}
		}
	}
	return nil
}

func (c *Controller) event(ctx context.Context, obj client.Object, typ, reason, msg string) {
	c.publish(ctx, events.Event{Object: obj, Type: typ, Reason: reason, Message: msg})
}

func (c *Controller) publish(ctx context.Context, ev events.Event) {
	if err := c.recorder.Publish(ctx, ev); err != nil {
		c.log.Warn("writing event", "reason", ev.Reason, "object", ev.Object.GetName(), "error", err)
	}
}

// syncStatus writes NodePool and AKSNodeClass status from snap and asks for
// a provisioning pass when a NodePool became Ready (its pending pods waited
// for it; the relay's resync would come later).
func (c *Controller) syncStatus(ctx context.Context, snap *snapshot.Cluster) []error {
	if c.opts.Status == nil {
		return nil
	}
	synced, err := nodepoolstatus.Sync(ctx, c.kube, nodepoolstatus.Objects{NodePools: snap.NodePools,
		NodeClasses: snap.NodeClasses, NodeClaims: snap.NodeClaims}, *c.opts.Status, c.clock)
	errs := []error{err}
	if len(synced.BecameReady) == 0 {
		return errs
	}
	if err := triggers.Publish(ctx, c.opts.Publisher, triggers.ProvisionPass(c.opts.ClusterName, "nodepool-ready", c.clock.Now(), 0)); err != nil {
		return append(errs, fmt.Errorf("asking for a provisioning pass after NodePools %v became Ready: %w", synced.BecameReady, err))
	}
	c.log.Info("nodepools became ready; provisioning pass asked", "nodepools", synced.BecameReady)
	return errs
}

// NodeVersions is the VersionSource of a running cluster: each
// NodeClaim's image definition at its current version (Images), and the
// control plane's Kubernetes version (Kubernetes).
type NodeVersions struct {
	Images interface {
		Current(ctx context.Context, img nodeimage.Image) (nodeimage.Image, error)
	}
	Kubernetes func(ctx context.Context) (string, error)
}

// Versions resolves every image definition the claims booted, once each.
func (n NodeVersions) Versions(ctx context.Context, claims []*karpv1.NodeClaim) (disruption.Versions, error) {
	out := disruption.Versions{Images: map[string]string{}}
	var errs []error
	for _, nc := range claims {
		img, ok := nodeimage.Parse(nc.Status.ImageID)
		if !ok || n.Images == nil {
			continue
		}
		if _, done := out.Images[img.DefinitionKey()]; done {
			continue
		}
		cur, err := n.Images.Current(ctx, img)
		if err != nil {
			errs = append(errs, err)
			out.Images[img.DefinitionKey()] = "" // tried; dropped below
			continue
		}
		out.Images[img.DefinitionKey()] = cur.ID()
	}
	for k, v := range out.Images {
		if v == "" {
			delete(out.Images, k)
		}
	}
	if n.Kubernetes != nil {
		v, err := n.Kubernetes(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the control plane's Kubernetes version: %w", err))
		}
		out.Kubernetes = v
	}
	return out, errors.Join(errs...)
}
