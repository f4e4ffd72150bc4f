package decisions

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

var meter = otel.Meter("github.com/karpfunc/karpfunc/pkg/decisions")

var (
	decisionsTotal, _ = meter.Int64Counter("karpfunc_decisions_total",
		metric.WithDescription("Decisions recorded, by decision (launch, giveUp, interruption, consolidation), NodePool and capacity type."))
	publishFailures, _ = meter.Int64Counter("karpfunc_decision_publish_failures_total",
		metric.WithDescription("Decision events that could not be published to Event Grid (the decision stands)."))
)
