package sender

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

type recordingBus struct {
	mu   sync.Mutex
	msgs []bus.Message
}

func (r *recordingBus) Publish(_ context.Context, _ string, msgs ...bus.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msgs...)
	return nil
}
func (r *recordingBus) Close(context.Context) error { return nil }

// TestPublishCarriesTraceContext: each published message carries the W3C
// trace context of the producer span around its publish, beside its own
// properties, and the caller's message is left as it was.
func TestPublishCarriesTraceContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) }()

	pub := &recordingBus{}
	s, err := New(Options{Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	props := map[string]any{"type": "t"}
	s.Send(bus.QueueProvision, bus.Message{ID: "m1", Body: []byte("{}"), ApplicationProperties: props})
	deadline := time.Now().Add(10 * time.Second)
	for s.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done

	if len(pub.msgs) != 1 {
		t.Fatalf("published %d messages; want 1", len(pub.msgs))
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "provision publish" {
		t.Fatalf("spans %v; want one \"provision publish\"", spans)
	}
	sc := spans[0].SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	got := pub.msgs[0].ApplicationProperties
	if got["traceparent"] != want || got["Diagnostic-Id"] != want || got["type"] != "t" {
		t.Errorf("published properties %v; want traceparent and Diagnostic-Id %s beside type", got, want)
	}
	if _, leaked := props["traceparent"]; leaked {
		t.Errorf("the caller's properties were modified: %v", props)
	}
}
