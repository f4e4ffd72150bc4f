package azure

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/karpfunc/karpfunc/pkg/telemetry"
)

// telemetryPolicy wraps every ARM call (a per-call policy: one span and one
// measurement around the SDK's retries) in a client span named
// "ARM <operation>" and records karpfunc_arm_request_duration_seconds.
// A failed asynchronous operation answers its status poll with 200 and an
// error object: the policy reads the ARM code from there too.
type telemetryPolicy struct{}

func (telemetryPolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	op := ARMOperation(raw.Method, raw.URL.Path)
	ctx, span := otel.Tracer(scope).Start(raw.Context(), "ARM "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", raw.Method), attribute.String("url.path", raw.URL.Path),
			attribute.String("server.address", raw.URL.Host), attribute.String("azure.arm.operation", op)))
	defer span.End()
	start := time.Now()
	resp, err := req.WithContext(ctx).Next()
	status := 0
	code := ""
	switch {
	case err != nil:
		code = "TransportError"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	default:
		status = resp.StatusCode
		code = responseErrorCode(resp)
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if code != "" {
			span.SetAttributes(attribute.String("azure.arm.error_code", code))
			span.SetStatus(codes.Error, code)
		}
	}
	armRequestDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
		attribute.String("controller", telemetry.Controller(ctx)), attribute.String("operation", op),
		attribute.String("status_code", strconv.Itoa(status)), attribute.String("error", code)))
	return resp, err
}

// responseErrorCode is the ARM error code of an error response, or of a
// failed asynchronous operation's status, or "".
func responseErrorCode(resp *http.Response) string {
	async := resp.StatusCode == http.StatusOK && strings.Contains(strings.ToLower(resp.Request.URL.Path), "/operations/")
	if resp.StatusCode < 400 && !async {
		return ""
	}
	body, _ := runtime.Payload(resp) // buffered: the SDK reads it again
	var doc struct {
		Status string `json:"status"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &doc)
	if async {
		if strings.EqualFold(doc.Status, "Failed") && doc.Error != nil {
			return doc.Error.Code
		}
		return ""
	}
	switch {
	case doc.Error != nil && doc.Error.Code != "":
		return doc.Error.Code
	case doc.Code != "":
		return doc.Code
	case resp.Header.Get("x-ms-error-code") != "":
		return resp.Header.Get("x-ms-error-code")
	}
	return "HTTP" + strconv.Itoa(resp.StatusCode)
}

// ARMOperation names an ARM request by the resource type it addresses and
// what it does to it: "virtualMachines.CreateOrUpdate",
// "networkInterfaces.Delete", "virtualMachines.List", "operations.Get" (a
// long-running operation's status poll).
func ARMOperation(method, path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// After ".../providers/<Namespace>/" come type/name pairs.
	rest, underProvider := afterProvider(parts)
	if count := len(rest); underProvider && count >= 3 && count%2 == 1 && method == http.MethodPost {
		return rest[count-3] + "." + rest[count-1] // an action: virtualMachines.deallocate
	}
	typ, named := armResourceType(parts, rest)
	return typ + "." + armVerb(method, named)
}

// afterProvider returns what follows "providers/<Namespace>/" in parts.
func afterProvider(parts []string) ([]string, bool) {
	for i := 0; i < len(parts); i++ {
		if strings.EqualFold(parts[i], "providers") && i+1 < len(parts) {
			return parts[i+2:], true
		}
	}
	return nil, false
}

// armResourceType is the last resource type in the provider's type/name
// pairs, and whether a name follows it; without one, the path's last
// segments stand in.
func armResourceType(parts, rest []string) (string, bool) {
	typ := "resource"
	named := false
	for j := 0; j < len(rest); j += 2 {
		typ = rest[j]
		named = j+1 < len(rest)
	}
	if typ != "resource" || len(parts) == 0 {
		return typ, named
	}
	if len(parts) >= 2 {
		return parts[len(parts)-2], true
	}
	return parts[len(parts)-1], false
}

// armVerbs names what each HTTP method does to an ARM resource.
var armVerbs = map[string]string{
	http.MethodPut:    "CreateOrUpdate",
	http.MethodPatch:  "Update",
	http.MethodDelete: "Delete",
	http.MethodPost:   "Action",
}

func armVerb(method string, named bool) string {
	if method == http.MethodGet {
		if named {
			return "Get"
		}
		return "List"
	}
	if verb, ok := armVerbs[method]; ok {
		return verb
	}
	return method
}
