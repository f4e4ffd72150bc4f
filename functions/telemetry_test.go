package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
	"github.com/karpfunc/karpfunc/pkg/telemetry"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// invoke posts one Service Bus invocation carrying parent's trace context
// to fn through the custom handler protocol.
func invoke(t *testing.T, obs observed, name string, fn customhandler.Func) int {
	t.Helper()
	srv := httptest.NewServer(customhandler.HandleWithOptions(obs.instrument(name, fn), customhandler.HandlerOptions{LogMirror: &bytes.Buffer{}}))
	defer srv.Close()
	body := `{"Data":{"msg":"\"{}\""},"Metadata":{"MessageId":"m1","DeliveryCount":"1","ApplicationProperties":{"traceparent":"` + parent + `","type":"x"}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/"+name, strings.NewReader(body))
	req.Header.Set("X-Azure-Functions-InvocationId", "inv-1")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestInstrument: an invocation continues the message's trace, is counted
// by function and outcome, and is exported before the host gets the answer.
func TestInstrument(t *testing.T) {
	rcv := otlpreceiver.Start()
	defer rcv.Close()
	t.Setenv(telemetry.EnvEndpoint, rcv.URL())
	obs := setupTelemetry(func(k string) string { return map[string]string{telemetry.EnvEndpoint: rcv.URL()}[k] }, slog.Default())
	defer obs.tel.Shutdown(context.Background())

	for _, c := range []struct {
		fn     customhandler.Func
		status int
	}{
		{func(context.Context, *customhandler.Invocation, *customhandler.Logger) error { return nil }, 200},
		{func(context.Context, *customhandler.Invocation, *customhandler.Logger) error {
			return errors.New("ARM busy")
		}, 500},
		{func(context.Context, *customhandler.Invocation, *customhandler.Logger) error {
			return customhandler.NewPermanentError("bad message")
		}, 400},
		{func(context.Context, *customhandler.Invocation, *customhandler.Logger) error { panic("boom") }, 500},
	} {
		if got := invoke(t, obs, "Provision", c.fn); got != c.status {
			t.Fatalf("invocation answered %d; want %d", got, c.status)
		}
	}
	// Exported before the answer: nothing to wait for.
	spans := rcv.Spans()
	if len(spans) != 4 {
		t.Fatalf("receiver has %d spans after 4 invocations; want 4 (flushed before answering)", len(spans))
	}
	for _, s := range spans {
		if s.Name != "Provision process" || s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.ParentSpanID != "00f067aa0ba902b7" ||
			s.Kind != "SPAN_KIND_CONSUMER" || s.Service != "karpfunc-functions" {
			t.Errorf("span %+v; want a consumer span \"Provision process\" under the message's traceparent", s)
		}
	}
	got := map[string]float64{}
	for _, p := range rcv.Points("karpfunc_messages_total") {
		got[p.Attributes["function"]+"/"+p.Attributes["outcome"]] = p.Value
	}
	for _, k := range []string{"Provision/success", "Provision/retry", "Provision/permanent", "Provision/panic"} {
		if got[k] != 1 {
			t.Errorf("karpfunc_messages_total{%s} = %v; want 1 (all: %v)", k, got[k], got)
		}
	}
}

// TestTelemetryDownNeverFailsAFunction: an OTLP endpoint that is down
// leaves the invocation's answer as it was, with a log line.
func TestTelemetryDownNeverFailsAFunction(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv(telemetry.EnvEndpoint, down)
	var logs bytes.Buffer
	obs := setupTelemetry(func(k string) string { return map[string]string{telemetry.EnvEndpoint: down}[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
	defer obs.tel.Shutdown(context.Background())
	if got := invoke(t, obs, "Lifecycle", func(context.Context, *customhandler.Invocation, *customhandler.Logger) error { return nil }); got != 200 {
		t.Fatalf("invocation answered %d with the collector down; want 200", got)
	}
	if !strings.Contains(logs.String(), "the work goes on") {
		t.Errorf("no log line about the failed export: %q", logs.String())
	}
	// A setting that cannot be used: a log line, the functions run.
	logs.Reset()
	obs = setupTelemetry(func(k string) string {
		return map[string]string{telemetry.EnvEndpoint: down, telemetry.EnvProtocol: "grpc"}[k]
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := invoke(t, obs, "Lifecycle", func(context.Context, *customhandler.Invocation, *customhandler.Logger) error { return nil }); got != 200 {
		t.Fatalf("invocation answered %d with an unusable protocol setting; want 200", got)
	}
	if !strings.Contains(logs.String(), telemetry.EnvProtocol) {
		t.Errorf("setup did not log the unusable %s: %q", telemetry.EnvProtocol, logs.String())
	}
}
