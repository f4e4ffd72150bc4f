// Package otlpreceiver is a small OTLP/HTTP receiver (protobuf, as the Go
// SDK's otlptracehttp and otlpmetrichttp exporters send) for tests: it keeps
// every span and metric data point it is sent, flattened for assertions.
// It answers what a collector answers: 200 with an empty Export*ServiceResponse,
// 415 for a content type it cannot read, 400 for a body that is not one.
package otlpreceiver

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	Service                       string
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string
	Attributes                    map[string]string
	Error                         bool
	// Start and End are when the span began and ended.
	Start, End time.Time
}

// Point is one received data point: Value for sums and gauges; Count and
// Sum for histograms.
type Point struct {
	Service    string
	Attributes map[string]string
	Value      float64
	Count      uint64
	Sum        float64
	Histogram  bool
}

// Receiver is a running receiver.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	points   map[string][]Point // by metric name, in arrival order
	requests int
}

// Start starts a receiver on loopback.
func Start() *Receiver {
	receiver := &Receiver{points: map[string][]Point{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", receiver.traces)
	mux.HandleFunc("POST /v1/metrics", receiver.metrics)
	receiver.srv = httptest.NewServer(mux)
	return receiver
}

// URL is the base URL, the value of OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Points returns every data point of metric name received so far. Exports
// are cumulative, so the last point of a series is its current value.
func (r *Receiver) Points(name string) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Point(nil), r.points[name]...)
}

// MetricNames are the metrics received so far.
func (r *Receiver) MetricNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.points))
	for name := range r.points {
		out = append(out, name)
	}
	return out
}

func read(w http.ResponseWriter, req *http.Request, m proto.Message) bool {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("content type %q: this receiver reads application/x-protobuf", ct), http.StatusUnsupportedMediaType)
		return false
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err == nil {
		err = proto.Unmarshal(raw, m)
	}
	if err != nil {
		http.Error(w, "not an OTLP export request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func respond(w http.ResponseWriter, m proto.Message) {
	raw, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(raw)
}

// unixNano is an OTLP timestamp (nanoseconds since the epoch) as a time;
// one past the int64 range (after the year 2262) is the latest time.
func unixNano(nanos uint64) time.Time {
	return time.Unix(0, int64(min(nanos, math.MaxInt64)))
}

func (r *Receiver) traces(w http.ResponseWriter, req *http.Request) {
	var in coltracepb.ExportTraceServiceRequest
	if !read(w, req, &in) {
		return
	}
	var spans []Span
	for _, resource := range in.ResourceSpans {
		svc := attrs(resource.GetResource().GetAttributes())["service.name"]
		for _, scope := range resource.ScopeSpans {
			for _, span := range scope.Spans {
				spans = append(spans, Span{Service: svc, TraceID: hex.EncodeToString(span.TraceId), SpanID: hex.EncodeToString(span.SpanId),
					ParentSpanID: hex.EncodeToString(span.ParentSpanId), Name: span.Name, Kind: span.Kind.String(),
					Attributes: attrs(span.Attributes), Error: span.GetStatus().GetCode() == 2,
					Start: unixNano(span.StartTimeUnixNano), End: unixNano(span.EndTimeUnixNano)})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.requests++
	r.mu.Unlock()
	respond(w, &coltracepb.ExportTraceServiceResponse{})
}

func (r *Receiver) metrics(w http.ResponseWriter, req *http.Request) {
	var in colmetricpb.ExportMetricsServiceRequest
	if !read(w, req, &in) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	for _, rm := range in.ResourceMetrics {
		svc := attrs(rm.GetResource().GetAttributes())["service.name"]
		for _, sm := range rm.ScopeMetrics {
			for _, metric := range sm.Metrics {
				for _, point := range flatten(metric) {
					point.Service = svc
					r.points[metric.Name] = append(r.points[metric.Name], point)
				}
			}
		}
	}
	respond(w, &colmetricpb.ExportMetricsServiceResponse{})
}

func flatten(m *metricpb.Metric) []Point {
	var out []Point
	number := func(dp *metricpb.NumberDataPoint) Point {
		value := dp.GetAsDouble()
		if _, ok := dp.Value.(*metricpb.NumberDataPoint_AsInt); ok {
			value = float64(dp.GetAsInt())
		}
		return Point{Attributes: attrs(dp.Attributes), Value: value}
	}
	switch data := m.Data.(type) {
	case *metricpb.Metric_Sum:
		for _, dp := range data.Sum.DataPoints {
			out = append(out, number(dp))
		}
	case *metricpb.Metric_Gauge:
		for _, dp := range data.Gauge.DataPoints {
			out = append(out, number(dp))
		}
	case *metricpb.Metric_Histogram:
		for _, dp := range data.Histogram.DataPoints {
			out = append(out, Point{Attributes: attrs(dp.Attributes), Count: dp.Count, Sum: dp.GetSum(), Histogram: true})
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		value := kv.GetValue()
		switch variant := value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = variant.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = fmt.Sprint(variant.IntValue)
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = fmt.Sprint(variant.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = fmt.Sprint(variant.DoubleValue)
		default:
			out[kv.Key] = value.String()
		}
	}
	return out
}
