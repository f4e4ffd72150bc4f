package telemetry

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// KubeTracerName is the instrumentation scope of the Kubernetes client spans.
const KubeTracerName = "github.com/karpfunc/karpfunc/kubernetes"

// WrapKubeTransport returns rt with one client span per Kubernetes API
// request, named "kubernetes <verb> <resource>", for rest.Config.Wrap.
func WrapKubeTransport(rt http.RoundTripper) http.RoundTripper {
	return kubeTransport{next: rt}
}

type kubeTransport struct{ next http.RoundTripper }

func (t kubeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := otel.Tracer(KubeTracerName).Start(req.Context(), "kubernetes "+req.Method+" "+KubeResource(req.URL.Path),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", req.Method), attribute.String("url.path", req.URL.Path),
			attribute.String("server.address", req.URL.Host)))
	defer span.End()
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		span.SetStatus(codes.Error, resp.Status)
	}
	return resp, nil
}

// KubeResource is the resource (and subresource) an API path names:
// /api/v1/namespaces/ns/pods/p/eviction is "pods/eviction",
// /apis/karpenter.sh/v1/nodeclaims is "nodeclaims".
func KubeResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return "namespaces"
		}
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
