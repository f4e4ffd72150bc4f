package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
	"github.com/karpfunc/karpfunc/pkg/bus"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestOTLPExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, a span and a counter
// reach an OTLP/HTTP receiver on Flush, under the configured service name.
func TestOTLPExport(t *testing.T) {
	rcv := otlpreceiver.Start()
	defer rcv.Close()
	t.Setenv(EnvEndpoint, rcv.URL()) // the exporters read the standard settings themselves
	tel, err := Setup(context.Background(), Options{ServiceName: "svc-test", Getenv: env(map[string]string{EnvEndpoint: rcv.URL()})})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if !tel.OTLP {
		t.Fatal("Setup: OTLP off with an endpoint set")
	}
	ctx, span := otel.Tracer("test").Start(context.Background(), "work")
	c, _ := otel.Meter("test").Int64Counter("karpfunc_test_total")
	c.Add(ctx, 3, metric.WithAttributes(attribute.String("outcome", "success")))
	span.End()
	tel.Flush(ctx)

	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Name != "work" || spans[0].Service != "svc-test" {
		t.Fatalf("received spans %+v; want one span \"work\" of service svc-test", spans)
	}
	pts := rcv.Points("karpfunc_test_total")
	if len(pts) != 1 || pts[0].Value != 3 || pts[0].Attributes["outcome"] != "success" {
		t.Fatalf("received points %+v; want one point 3 {outcome=success}", pts)
	}
}

// TestEndpointDown: a collector that is not there costs a log line on
// Flush, never an error or a panic.
func TestEndpointDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv(EnvEndpoint, down)
	var logs syncBuffer
	tel, err := Setup(context.Background(), Options{ServiceName: "down", Getenv: env(map[string]string{EnvEndpoint: down}),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	span.End()
	c, _ := otel.Meter("test").Int64Counter("karpfunc_test_down_total")
	c.Add(context.Background(), 1)
	tel.Flush(context.Background())
	if !strings.Contains(logs.String(), "flushing") || !strings.Contains(logs.String(), "the work goes on") {
		t.Fatalf("Flush against a closed port logged %q; want a warning line per failed signal", logs.String())
	}
}

func TestSettingsRefusedByName(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"grpc protocol", map[string]string{EnvEndpoint: "http://c:4317", EnvProtocol: "grpc"}, []string{EnvProtocol, `"grpc"`, "http/protobuf"}},
		{"per-signal protocol wins", map[string]string{EnvEndpoint: "http://c:4318", EnvProtocol: "http/protobuf", EnvTracesProtocol: "http/json"},
			[]string{EnvTracesProtocol, "http/json"}},
		{"not a URL", map[string]string{EnvEndpoint: "collector:4318"}, []string{EnvEndpoint, `"collector:4318"`, "http://collector:4318"}},
		{"bad metrics endpoint", map[string]string{EnvMetricsEndpoint: "ftp://x/v1/metrics"}, []string{EnvMetricsEndpoint}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, err := Setup(context.Background(), Options{Getenv: env(tt.env)})
			if err == nil {
				t.Fatalf("Setup(%v) = nil error", tt.env)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Setup error %q; want it to name %q", err, w)
				}
			}
			tel.Flush(context.Background()) // usable despite the error
			tel.Shutdown(context.Background())
		})
	}
	tel, err := Setup(context.Background(), Options{Getenv: env(map[string]string{EnvEndpoint: "http://c:4318", EnvSDKDisabled: "true"})})
	if err != nil || tel.OTLP {
		t.Fatalf("OTEL_SDK_DISABLED=true: Setup = OTLP %v, %v; want nothing exported", tel.OTLP, err)
	}
}

// TestPrometheusNames: the relay's /metrics shows Karpenter's names as
// declared: no second _total, no unit suffix.
func TestPrometheusNames(t *testing.T) {
	tel, err := Setup(context.Background(), Options{Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	c, _ := otel.Meter("test").Int64Counter("karpenter_nodeclaims_created_total")
	c.Add(context.Background(), 2, metric.WithAttributes(attribute.String("nodepool", "default")))
	h, _ := otel.Meter("test").Float64Histogram("karpenter_pods_bound_duration_seconds", metric.WithUnit("s"))
	h.Record(context.Background(), 1.5)
	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`karpenter_nodeclaims_created_total{nodepool="default"} 2`, "karpenter_pods_bound_duration_seconds_count 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"_total_total", "_seconds_seconds"} {
		if strings.Contains(string(body), bad) {
			t.Errorf("/metrics has a doubled suffix %q", bad)
		}
	}
}

func TestPropagation(t *testing.T) {
	if _, err := Setup(context.Background(), Options{}); err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	parent := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	props := Inject(parent, map[string]any{"type": "x"})
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if props["traceparent"] != want || props[DiagnosticIDProperty] != want || props["type"] != "x" {
		t.Fatalf("Inject = %v; want traceparent and Diagnostic-Id %s beside the existing property", props, want)
	}
	if got := Inject(context.Background(), nil); got != nil {
		t.Fatalf("Inject without a span = %v; want nothing written", got)
	}
	for name, props := range map[string]map[string]any{
		"traceparent":         {"traceparent": want},
		"Diagnostic-Id alone": {DiagnosticIDProperty: want},
	} {
		sc := trace.SpanContextFromContext(Extract(context.Background(), props))
		if !sc.IsRemote() || sc.TraceID() != tid || sc.SpanID() != sid {
			t.Errorf("Extract(%s) = %v; want the remote parent %s", name, sc, want)
		}
	}
	if sc := trace.SpanContextFromContext(Extract(context.Background(), map[string]any{"traceparent": "garbage"})); sc.IsValid() {
		t.Errorf("Extract(garbage) = %v; want no parent", sc)
	}
}

func TestKubeResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods/p/eviction":              "pods/eviction",
		"/api/v1/pods":                                       "pods",
		"/api/v1/nodes/n1":                                   "nodes",
		"/apis/karpenter.sh/v1/nodeclaims/nc/status":         "nodeclaims/status",
		"/apis/coordination.k8s.io/v1/namespaces/k/leases/l": "leases",
		"/api/v1/namespaces/ns":                              "namespaces",
		"/version":                                           "other",
		"/apis/karpenter.sh/v1":                              "discovery",
	} {
		if got := KubeResource(path); got != want {
			t.Errorf("KubeResource(%s) = %q; want %q", path, got, want)
		}
	}
}

type recordingPublisher struct{ msgs []bus.Message }

func (r *recordingPublisher) Publish(_ context.Context, _ string, msgs ...bus.Message) error {
	r.msgs = append(r.msgs, msgs...)
	return nil
}
func (r *recordingPublisher) Close(context.Context) error { return nil }

func TestTracingPublisher(t *testing.T) {
	if _, err := Setup(context.Background(), Options{}); err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	rec := &recordingPublisher{}
	mine := map[string]any{"type": "t"}
	if err := TracingPublisher(rec).Publish(ctx, "lifecycle", bus.Message{ID: "a", ApplicationProperties: mine}, bus.Message{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range rec.msgs {
		if m.ApplicationProperties["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Errorf("message %s properties %v; want the publisher's trace context", m.ID, m.ApplicationProperties)
		}
	}
	if rec.msgs[0].ApplicationProperties["type"] != "t" || len(mine) != 1 {
		t.Errorf("properties %v (caller's %v): want the message's own kept and the caller's map untouched", rec.msgs[0].ApplicationProperties, mine)
	}
}
