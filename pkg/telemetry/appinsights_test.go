package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// entraToken is a credential that issues one token for the Application
// Insights audience and refuses any other scope.
type entraToken struct{}

func (entraToken) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if len(o.Scopes) != 1 || o.Scopes[0] != "https://monitor.azure.com//.default" {
		return azcore.AccessToken{}, &scopeError{o.Scopes}
	}
	return azcore.AccessToken{Token: "monitor-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

type scopeError struct{ scopes []string }

func (e *scopeError) Error() string { return "unexpected scopes " + strings.Join(e.scopes, ",") }

// ingestion stands in for Application Insights' track endpoint with local
// auth off: POST /v2.1/track with an Entra ID bearer token, a JSON array of
// telemetry items; the answer counts what it accepted.
type ingestion struct {
	mu    sync.Mutex
	items []envelope
}

func (in *ingestion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v2.1/track" {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer monitor-token" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"itemsReceived":0,"itemsAccepted":0,"errors":[{"index":0,"statusCode":401,"message":"Authentication required"}]}`)
		return
	}
	var items []envelope
	if err := json.NewDecoder(r.Body).Decode(&items); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	in.mu.Lock()
	in.items = append(in.items, items...)
	in.mu.Unlock()
	_ = json.NewEncoder(w).Encode(trackResponse{ItemsReceived: len(items), ItemsAccepted: len(items)})
}

func (in *ingestion) take() map[string][]envelope {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string][]envelope{}
	for _, it := range in.items {
		out[it.Data.BaseData.Metrics[0].Name] = append(out[it.Data.BaseData.Metrics[0].Name], it)
	}
	in.items = nil
	return out
}

func TestMetricsReachApplicationInsightsWithEntraID(t *testing.T) {
	in := &ingestion{}
	srv := httptest.NewTLSServer(in)
	defer srv.Close()
	env := map[string]string{EnvAppInsights: "InstrumentationKey=ikey-1;IngestionEndpoint=" + srv.URL + "/;LiveEndpoint=https://live.example/"}
	tel, err := Setup(context.Background(), Options{ServiceName: "karpfunc-functions", Getenv: func(k string) string { return env[k] },
		Credential: entraToken{}, AppInsightsClient: srv.Client(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil || !tel.AppInsights {
		t.Fatalf("Setup = %+v, %v; want Application Insights on", tel, err)
	}
	defer tel.Shutdown(context.Background())
	meter := otel.Meter("test")
	counter, _ := meter.Int64Counter("karpfunc_messages_total")
	hist, _ := meter.Float64Histogram("karpfunc_function_duration_seconds")
	attrs := metric.WithAttributes(attribute.String("function", "Provision"), attribute.String("outcome", "success"))
	ctx := context.Background()
	counter.Add(ctx, 2, attrs)
	counter.Add(ctx, 3, attrs)
	hist.Record(ctx, 1, attrs)
	hist.Record(ctx, 3, attrs)
	tel.Flush(ctx)

	got := in.take()
	c := got["karpfunc_messages_total"]
	if len(c) != 1 || c[0].Data.BaseData.Metrics[0].Value != 5 || c[0].IKey != "ikey-1" || c[0].Data.BaseType != "MetricData" ||
		c[0].Data.BaseData.Properties["function"] != "Provision" || c[0].Tags["ai.cloud.role"] != "karpfunc-functions" {
		t.Fatalf("counter items = %+v", c)
	}
	h := got["karpfunc_function_duration_seconds"]
	if len(h) != 1 {
		t.Fatalf("histogram items = %+v", h)
	}
	if p := h[0].Data.BaseData.Metrics[0]; p.Kind != "Aggregation" || p.Value != 4 || p.Count == nil || *p.Count != 2 || *p.Min != 1 || *p.Max != 3 {
		t.Errorf("histogram point = %+v, want sum 4, count 2, min 1, max 3", p)
	}
	// Deltas: the next export carries only what happened since.
	counter.Add(ctx, 1, attrs)
	tel.Flush(ctx)
	if c := in.take()["karpfunc_messages_total"]; len(c) != 1 || c[0].Data.BaseData.Metrics[0].Value != 1 {
		t.Errorf("second export = %+v, want the delta 1", c)
	}
}

func TestAppInsightsSettings(t *testing.T) {
	for _, tc := range []struct {
		name, connection, wantURL, wantErr string
	}{
		{"regional endpoint", "InstrumentationKey=k;IngestionEndpoint=https://westeurope-5.in.applicationinsights.azure.com/;ApplicationId=a", "https://westeurope-5.in.applicationinsights.azure.com/v2.1/track", ""},
		{"no endpoint: the global one", "instrumentationkey=k", "https://dc.services.visualstudio.com/v2.1/track", ""},
		{"no key", "IngestionEndpoint=https://x/", "", "no InstrumentationKey"},
		{"http endpoint", "InstrumentationKey=k;IngestionEndpoint=http://x/", "", "not an https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConnectionString(tc.connection)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), EnvAppInsights) {
					t.Fatalf("err = %v, want one naming %s and saying %q", err, EnvAppInsights, tc.wantErr)
				}
				return
			}
			if err != nil || got.trackURL != tc.wantURL || got.iKey != "k" {
				t.Fatalf("parse = %+v, %v; want %s", got, err, tc.wantURL)
			}
		})
	}
	if err := trackResult(http.StatusPartialContent, []byte(`{"itemsReceived":2,"itemsAccepted":1,"errors":[{"index":1,"statusCode":400,"message":"Field 'name' is required"}]}`), 2); err == nil || !strings.Contains(err.Error(), "1 of 2") || !strings.Contains(err.Error(), "'name' is required") {
		t.Errorf("partial acceptance: err = %v", err)
	}
	if err := trackResult(http.StatusOK, []byte(`{"itemsReceived":1,"itemsAccepted":1}`), 1); err != nil {
		t.Errorf("full acceptance: err = %v", err)
	}
}
