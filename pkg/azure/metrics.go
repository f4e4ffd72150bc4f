package azure

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Instrumentation scope of the ARM client's spans and metrics.
const scope = "github.com/karpfunc/karpfunc/pkg/azure"

var meter = otel.Meter(scope)

// armRequestDuration is karpfunc's own: every ARM request the SDK clients
// make (after the SDK's retries), by operation, HTTP status and ARM error
// code ("" on success). Throttling shows here as TooManyRequests or
// SubscriptionRequestsThrottled before it shows anywhere else.
var armRequestDuration, _ = meter.Float64Histogram("karpfunc_arm_request_duration_seconds",
	metric.WithDescription("Duration of ARM requests, by operation, HTTP status code and ARM error code."),
	metric.WithUnit("s"),
	metric.WithExplicitBucketBoundaries(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
