// Package live carries pkg/disruption's decisions out on a running cluster:
// the Disruption function's controller.
//
// A pass reads the one cluster snapshot, finishes a command in flight,
// writes every NodeClaim's disruption conditions, deletes expired
// NodeClaims, explains every node it leaves alone (events), and starts at
// most one command; it asks for the next pass at the earliest deadline
// (consolidateAfter, expireAfter, do-not-disrupt). It never publishes: every
// message it asks for (the next pass, a validation, the replacements'
// launch checks, the deletions announced to Lifecycle) is a continuation in
// its Result's Outcome, which the caller sends.
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
//   - State lives in the cluster (a Record in annotations on the
//     replacements), never in the process: any pass, on any instance, can
//     finish a command.
//
// Files, by job: pass.go (the pass), orchestration.go (a command's life:
// validation, waiting for replacements, finishing), actuation.go (creating
// replacements, taking NodeClaims away), conditions.go (NodeClaim
// conditions and NodePool status), explanations.go (events for nodes left
// alone), convert.go and record.go (a command as a message and as a
// record), versions.go (the versions nodes should run).
package live

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/triggers"
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

// Replacer creates a replacement NodeClaim and returns the launch check
// that has lifecycle launch it, for the Outcome; *provisioning.Provisioner
// implements it.
type Replacer interface {
	Replace(ctx context.Context, plan *scheduler.NodeClaimPlan, annotations map[string]string) (*karpv1.NodeClaim, triggers.Continuation, error)
}

// Options configure a Controller.
type Options struct {
	Kube        client.Client
	Catalog     *catalog.Catalog
	Replacer    Replacer
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
	// Maintenance holds drift replacements outside the cluster's
	// maintenance windows (nil: drift may start at any time);
	// *maintenance.Reader implements it.
	Maintenance MaintenanceSource
	// Overlays reads the NodeOverlays candidates are priced with and
	// writes their status (nil: catalog prices).
	Overlays *nodeoverlay.Source
	// DisableCapacityBuffers: CapacityBuffers keep no room (the
	// provisioning pass refuses them by name), so disruption ignores them.
	DisableCapacityBuffers bool
}

// MaintenanceSource answers disruption.State.DriftHold for a decision at
// now; it may read what it needs on the first question.
type MaintenanceSource interface {
	DriftHold(ctx context.Context, now time.Time) func(reason string) (disruption.Hold, bool)
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
	// Next is when the next pass is asked for (zero: none).
	Next time.Time
	// Outcome holds the continuations the call asks for, for the caller to
	// send: the controller never publishes (the replacements' launch
	// checks, the deletions announced to Lifecycle, the validation, the
	// next pass, a provisioning pass).
	Outcome triggers.Outcome
}

// PodEvents are pod events the relay saw on nodes (a pod bound, deleted,
// finished), up to At.
type PodEvents struct {
	Nodes []string
	At    time.Time
}
