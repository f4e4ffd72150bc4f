package sender

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

const scope = "github.com/karpfunc/karpfunc/relay/internal/sender"

var meter = otel.Meter(scope)

// karpfunc's own: every publish attempt, by queue and outcome (success,
// retry).
var publishedTotal, _ = meter.Int64Counter("karpfunc_relay_messages_published_total",
	metric.WithDescription("Publish attempts of the relay, by queue and outcome (success, or retry after a failure)."))
