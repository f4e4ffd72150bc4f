// Package decisions records what karpfunc decided about capacity: one
// structured log line per decision (launch, give-up, interruption,
// consolidation) with a stable schema, and, when configured, the same
// record as a CloudEvent on an Event Grid topic.
//
// Invariants:
//   - Every decision is logged, whatever else happens: the log line is
//     written first and cannot fail.
//   - A publisher's failure (Event Grid down, refused, slow) is one log
//     line; it never fails, delays beyond PublishTimeout, or undoes the
//     decision.
//   - The schema is stable: fields are only ever added. Fields lists every
//     key a record's log line carries (the workbook's queries use them).
package decisions

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Kind is what was decided.
type Kind string

// The decisions karpfunc records.
const (
	// Launch: a NodeClaim's VM was created.
	Launch Kind = "launch"
	// GiveUp: no offering could be launched for a NodeClaim; it is deleted
	// and its pods provisioned again (InsufficientCapacity).
	GiveUp Kind = "giveUp"
	// Interruption: a spot VM got its preemption notice; its NodeClaim is
	// replaced and drained.
	Interruption Kind = "interruption"
	// Consolidation: a NodeClaim is removed (or replaced by a cheaper one)
	// because the fleet costs less without it.
	Consolidation Kind = "consolidation"
	// Disruption: a NodeClaim is replaced or removed because it drifted from
	// its NodePool or reached expireAfter.
	Disruption Kind = "disruption"
)

// Message is the log line's message: what a query filters on.
const Message = "karpfunc.decision"

// SchemaVersion is written on every record.
const SchemaVersion = "v1"

// Record is one decision. Size is the instance type (VM size); PricePerHour
// its offering's price in USD; Pods the pods it concerns, as
// namespace/name.
type Record struct {
	Decision     Kind      `json:"decision"`
	Time         time.Time `json:"time"`
	Cluster      string    `json:"cluster"`
	NodePool     string    `json:"nodePool"`
	NodeClaim    string    `json:"nodeClaim"`
	Size         string    `json:"size"`
	Zone         string    `json:"zone"`
	CapacityType string    `json:"capacityType"`
	PricePerHour float64   `json:"pricePerHour"`
	Reason       string    `json:"reason"`
	Pods         []string  `json:"pods"`
	// Replacements are the NodeClaims that take over (consolidation's
	// replacement, an interruption's replacement), if any.
	Replacements []string `json:"replacements,omitempty"`
	// SavingsPerHour is what a consolidation saves, in USD per hour.
	SavingsPerHour float64 `json:"savingsPerHour,omitempty"`
}

// Fields are the keys of a decision's log line, beside slog's time, level
// and msg.
var Fields = []string{"schema", "decision", "cluster", "nodePool", "nodeClaim", "size", "zone", "capacityType",
	"pricePerHour", "reason", "pods", "replacements", "savingsPerHour"}

func (r Record) attrs() []slog.Attr {
	pods := r.Pods
	if pods == nil {
		pods = []string{}
	}
	return []slog.Attr{
		slog.String("schema", SchemaVersion), slog.String("decision", string(r.Decision)),
		slog.String("cluster", r.Cluster), slog.String("nodePool", r.NodePool), slog.String("nodeClaim", r.NodeClaim),
		slog.String("size", r.Size), slog.String("zone", r.Zone), slog.String("capacityType", r.CapacityType),
		slog.Float64("pricePerHour", r.PricePerHour), slog.String("reason", r.Reason), slog.Any("pods", pods),
		slog.Any("replacements", r.Replacements), slog.Float64("savingsPerHour", r.SavingsPerHour),
	}
}

// Publisher sends decisions elsewhere (Event Grid).
type Publisher interface {
	Publish(ctx context.Context, record Record) error
}

// PublishTimeout bounds one publish: a decision's invocation waits no
// longer on a topic that does not answer.
const PublishTimeout = 5 * time.Second

// Recorder writes decisions. The zero value and nil log to slog.Default()
// and publish nowhere.
type Recorder struct {
	log        *slog.Logger
	publishers []Publisher
}

// NewRecorder returns a Recorder logging to log and publishing to pubs.
func NewRecorder(log *slog.Logger, pubs ...Publisher) *Recorder {
	return &Recorder{log: log, publishers: pubs}
}

// Record logs r, counts it, and publishes it; it never fails. A zero Time
// is set to now.
func (rec *Recorder) Record(ctx context.Context, r Record) {
	log := slog.Default()
	var pubs []Publisher
	if rec != nil {
		if rec.log != nil {
			log = rec.log
		}
		pubs = rec.publishers
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	log.LogAttrs(ctx, slog.LevelInfo, Message, r.attrs()...)
	decisionsTotal.Add(ctx, 1, metric.WithAttributes(attribute.String("decision", string(r.Decision)),
		attribute.String("nodepool", r.NodePool), attribute.String("capacity_type", r.CapacityType)))
	for _, pub := range pubs {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PublishTimeout)
		err := pub.Publish(pctx, r)
		cancel()
		if err != nil {
			publishFailures.Add(ctx, 1)
			log.Warn("decision not published; the decision stands", "decision", string(r.Decision),
				"nodeClaim", r.NodeClaim, "error", err)
		}
	}
}
