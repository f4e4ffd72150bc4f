package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// DiagnosticIDProperty is the application property the Azure SDKs and the
// Functions host's Service Bus extension read a message's parent from
// (W3C traceparent format). karpfunc writes it beside traceparent so the
// host's own telemetry joins the same trace.
const DiagnosticIDProperty = "Diagnostic-Id"

// propertiesCarrier adapts a message's application properties.
type propertiesCarrier map[string]any

func (c propertiesCarrier) Get(key string) string {
	switch v := c[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (c propertiesCarrier) Set(key, value string) { c[key] = value }

func (c propertiesCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for key := range c {
		keys = append(keys, key)
	}
	return keys
}

// Inject writes ctx's span context into props as W3C trace context
// (traceparent, tracestate) and Diagnostic-Id. It writes nothing when ctx
// carries no valid span, and returns props (a new map when props is nil and
// something was written).
func Inject(ctx context.Context, props map[string]any) map[string]any {
	tmp := propertiesCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, tmp)
	tp, ok := tmp["traceparent"]
	if !ok {
		return props
	}
	if props == nil {
		props = make(map[string]any, len(tmp)+1)
	}
	for key, value := range tmp {
		props[key] = value
	}
	props[DiagnosticIDProperty] = tp
	return props
}

// Extract returns ctx with the remote span context props carry:
// traceparent, or Diagnostic-Id when only that is set (messages from other
// Azure SDK producers). Properties without a readable parent leave ctx as is.
func Extract(ctx context.Context, props map[string]any) context.Context {
	carrier := propertiesCarrier(props)
	if carrier.Get("traceparent") == "" && carrier.Get(DiagnosticIDProperty) != "" {
		carrier = propertiesCarrier{"traceparent": carrier.Get(DiagnosticIDProperty)}
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}

type controllerKey struct{}

// WithController names the controller (the Function) ctx's work belongs to,
// the "controller" label Karpenter's cloud-provider metrics carry.
func WithController(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, controllerKey{}, name)
}

// Controller is the name WithController put in ctx, or "".
func Controller(ctx context.Context) string {
	name, _ := ctx.Value(controllerKey{}).(string)
	return name
}
