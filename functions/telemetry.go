package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/telemetry"
)

// Outcomes of karpfunc_messages_total.
const (
	outcomeSuccess   = "success"
	outcomeRetry     = "retry"     // failed; the host retries the message
	outcomePermanent = "permanent" // failed for good; dead-lettered
	outcomePanic     = "panic"
)

// observed wraps the functions with their telemetry: the trace the message
// carries continues in a span around the invocation, the invocation is
// counted and timed, and everything is flushed before the host gets its
// answer (the instance may be frozen right after).
type observed struct {
	tel *telemetry.Telemetry
	log *slog.Logger
}

// setupTelemetry installs OpenTelemetry from the OTEL_* app settings. A
// setting it cannot use is a log line, not a failure: the functions run
// without that signal.
func setupTelemetry(getenv func(string) string, log *slog.Logger) observed {
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "karpfunc-functions", Getenv: getenv, Logger: log})
	if err != nil {
		log.Error("telemetry settings not usable; the functions run without that telemetry", "error", err)
	}
	return observed{tel: tel, log: log}
}

// instrument is fn with its span, metrics and flush.
func (o observed) instrument(name string, fn customhandler.Func) customhandler.Func {
	return func(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) (err error) {
		start := time.Now()
		ctx = telemetry.WithController(telemetry.Extract(ctx, inv.Metadata.ApplicationProperties), name)
		ctx, span := otel.Tracer(tracerName).Start(ctx, name+" process", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("messaging.system", "servicebus"), attribute.String("faas.invocation_id", inv.InvocationID),
				attribute.String("messaging.message.id", inv.Metadata.MessageID), attribute.Int("messaging.servicebus.message.delivery_count", inv.Metadata.DeliveryCount)))
		outcome := outcomePanic
		defer func() {
			if outcome == outcomePanic {
				span.SetStatus(codes.Error, "panic")
			}
			span.End()
			attrs := metric.WithAttributes(attribute.String("function", name), attribute.String("outcome", outcome))
			messagesTotal.Add(ctx, 1, attrs)
			functionDuration.Record(ctx, time.Since(start).Seconds(), attrs)
			o.tel.Flush(ctx)
		}()
		err = fn(ctx, inv, log)
		switch {
		case err == nil:
			outcome = outcomeSuccess
		case customhandler.IsPermanent(err):
			outcome = outcomePermanent
		default:
			outcome = outcomeRetry
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}
}

// decisionRecorder logs decisions and, when KARPFUNC_DECISION_EVENTS_ENDPOINT
// is set, publishes them to that Event Grid topic as the Functions
// identity. A publisher that cannot be built is a log line: decisions are
// still logged.
func decisionRecorder(getenv func(string) string, log *slog.Logger) *decisions.Recorder {
	endpoint := getenv(decisions.EnvEventGridEndpoint)
	if endpoint == "" {
		return decisions.NewRecorder(log)
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err == nil {
		var eg *decisions.EventGrid
		if eg, err = decisions.NewEventGrid(endpoint, cred, nil); err == nil {
			return decisions.NewRecorder(log, eg)
		}
	}
	log.Error("decision events are not published (decisions are still logged)", "setting", decisions.EnvEventGridEndpoint, "error", err)
	return decisions.NewRecorder(log)
}
