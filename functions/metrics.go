package main

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

const tracerName = "github.com/karpfunc/karpfunc/functions"

var meter = otel.Meter(tracerName)

// karpfunc's own: every invocation, by function and outcome (success,
// retry, permanent, panic).
var (
	messagesTotal, _ = meter.Int64Counter("karpfunc_messages_total",
		metric.WithDescription("Messages handled by each function, by outcome: success, retry (the host redelivers), permanent (dead-lettered), panic."))
	functionDuration, _ = meter.Float64Histogram("karpfunc_function_duration_seconds",
		metric.WithDescription("Duration of function invocations, by function and outcome."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
)
