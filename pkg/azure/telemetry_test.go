package azure

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestARMOperation(t *testing.T) {
	rg := "/subscriptions/s/resourceGroups/rg/providers/"
	for _, tt := range []struct{ method, path, want string }{
		{http.MethodPut, rg + "Microsoft.Compute/virtualMachines/vm1", "virtualMachines.CreateOrUpdate"},
		{http.MethodGet, rg + "Microsoft.Compute/virtualMachines/vm1", "virtualMachines.Get"},
		{http.MethodGet, rg + "Microsoft.Compute/virtualMachines", "virtualMachines.List"},
		{http.MethodDelete, rg + "Microsoft.Network/networkInterfaces/vm1-nic", "networkInterfaces.Delete"},
		{http.MethodPost, rg + "Microsoft.Compute/virtualMachines/vm1/deallocate", "virtualMachines.deallocate"},
		{http.MethodGet, "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operations/abc", "operations.Get"},
		{http.MethodGet, "/subscriptions/s/providers/Microsoft.Compute/skus", "skus.List"},
		{http.MethodGet, "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages", "usages.List"},
	} {
		if got := ARMOperation(tt.method, tt.path); got != tt.want {
			t.Errorf("ARMOperation(%s %s) = %q; want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

// TestTelemetryPolicy: every ARM call gets a client span carrying the ARM
// error code, from an error response and from a failed operation's status.
func TestTelemetryPolicy(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":{"code":"SkuNotAvailable","message":"no"}}`))
		default:
			_, _ = w.Write([]byte(`{"status":"Failed","error":{"code":"OverconstrainedAllocationRequest"}}`))
		}
	}))
	defer srv.Close()
	pl := runtime.NewPipeline("test", "v0", runtime.PipelineOptions{}, &policy.ClientOptions{
		PerCallPolicies: []policy.Policy{telemetryPolicy{}}, Retry: policy.RetryOptions{MaxRetries: -1}})
	for _, c := range []struct{ method, path string }{
		{http.MethodPut, "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1"},
		{http.MethodGet, "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operations/op1"},
	} {
		req, err := runtime.NewRequest(context.Background(), c.method, srv.URL+c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := pl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body, _ := runtime.Payload(resp); len(body) == 0 {
			t.Fatal("the policy consumed the body the SDK reads")
		}
	}
	want := map[string]string{"ARM virtualMachines.CreateOrUpdate": "SkuNotAvailable", "ARM operations.Get": "OverconstrainedAllocationRequest"}
	spans := rec.Ended()
	if len(spans) != len(want) {
		t.Fatalf("%d spans; want %d", len(spans), len(want))
	}
	for _, s := range spans {
		code := ""
		for _, a := range s.Attributes() {
			if a.Key == "azure.arm.error_code" {
				code = a.Value.AsString()
			}
		}
		if want[s.Name()] != code {
			t.Errorf("span %q has ARM error code %q; want %q", s.Name(), code, want[s.Name()])
		}
	}
}
