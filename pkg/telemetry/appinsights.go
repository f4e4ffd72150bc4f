package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// EnvAppInsights is the Application Insights connection string metrics are
// sent to (the Functions host's own setting; the relay gets it from the
// chart). Empty: none.
const EnvAppInsights = "APPLICATIONINSIGHTS_CONNECTION_STRING"

// appInsightsScope is the Entra ID audience of Application Insights
// ingestion, as Azure Monitor's own exporters request it (Azure/azure-sdk-for-js
// sdk/monitor/monitor-opentelemetry-exporter httpSender.ts,
// "https://monitor.azure.com//.default"); the sender needs Monitoring
// Metrics Publisher on the resource (Learn: "Microsoft Entra authentication
// for Application Insights").
const appInsightsScope = "https://monitor.azure.com//.default"

// defaultIngestion is the ingestion endpoint of a connection string that
// names none (Learn: "Connection strings in Application Insights").
const defaultIngestion = "https://dc.services.visualstudio.com/"

// appInsightsTarget is what a connection string says: the resource's
// instrumentation key and its ingestion endpoint.
type appInsightsTarget struct {
	iKey, trackURL string
}

// parseConnectionString reads InstrumentationKey and IngestionEndpoint from
// key=value pairs separated by semicolons; keys are case-insensitive.
func parseConnectionString(s string) (appInsightsTarget, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			kv[strings.ToLower(strings.TrimSpace(key))] = strings.TrimSpace(value)
		}
	}
	if kv["instrumentationkey"] == "" {
		return appInsightsTarget{}, fmt.Errorf("telemetry: %s has no InstrumentationKey; metrics are not sent to Application Insights", EnvAppInsights)
	}
	endpoint := kv["ingestionendpoint"]
	if endpoint == "" {
		endpoint = defaultIngestion
	}
	parsed, err := url.Parse(endpoint)
	if err != nil || parsed.Scheme != "https" || parsed.Host == "" {
		return appInsightsTarget{}, fmt.Errorf("telemetry: %s: IngestionEndpoint %q is not an https URL; metrics are not sent to Application Insights", EnvAppInsights, endpoint)
	}
	return appInsightsTarget{iKey: kv["instrumentationkey"], trackURL: strings.TrimSuffix(parsed.String(), "/") + "/v2.1/track"}, nil
}

// appInsightsExporter sends metrics to Application Insights' ingestion
// endpoint as MetricData telemetry items (they land in customMetrics),
// signed in with Entra ID: Application Insights with local auth off
// accepts nothing else. Counters and histograms are exported as deltas,
// so customMetrics' value and valueSum add up across instances and time.
type appInsightsExporter struct {
	target appInsightsTarget
	cred   azcore.TokenCredential
	client *http.Client
}

func newAppInsightsExporter(connection string, cred azcore.TokenCredential, client *http.Client) (*appInsightsExporter, error) {
	target, err := parseConnectionString(connection)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &appInsightsExporter{target: target, cred: cred, client: client}, nil
}

// Temporality: deltas for what adds up (counters, histograms), cumulative
// for up-down counters and gauges, whose value is a level.
func (e *appInsightsExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	switch k {
	case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram, sdkmetric.InstrumentKindObservableCounter:
		return metricdata.DeltaTemporality
	default:
		return metricdata.CumulativeTemporality
	}
}

func (e *appInsightsExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e *appInsightsExporter) ForceFlush(context.Context) error { return nil }
func (e *appInsightsExporter) Shutdown(context.Context) error   { return nil }

// envelope is one Application Insights telemetry item (the track API's
// TelemetryItem with MetricsData; field names as the Azure Monitor
// exporters send them: Azure/azure-sdk-for-js monitor-opentelemetry-exporter
// generated models, ApplicationInsights-Java schemav2 DataPoint).
type envelope struct {
	Name string            `json:"name"`
	Time string            `json:"time"`
	IKey string            `json:"iKey"`
	Tags map[string]string `json:"tags,omitempty"`
	Data struct {
		BaseType string      `json:"baseType"`
		BaseData metricsData `json:"baseData"`
	} `json:"data"`
}

type metricsData struct {
	Ver        int               `json:"ver"`
	Metrics    []dataPoint       `json:"metrics"`
	Properties map[string]string `json:"properties,omitempty"`
}

// dataPoint is one metric value: a measurement, or an aggregation with
// count, min and max (customMetrics' valueCount, valueMin, valueMax; value
// is valueSum).
type dataPoint struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind,omitempty"`
	Value float64  `json:"value"`
	Count *int64   `json:"count,omitempty"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

// trackResponse is the ingestion endpoint's answer.
type trackResponse struct {
	ItemsReceived int `json:"itemsReceived"`
	ItemsAccepted int `json:"itemsAccepted"`
	Errors        []struct {
		Index      int    `json:"index"`
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message"`
	} `json:"errors"`
}

// Export sends every data point; a refused batch is an error (the SDK
// hands it to the error handler: one log line).
func (e *appInsightsExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	items := e.envelopes(rm)
	if len(items) == 0 {
		return nil
	}
	body, err := json.Marshal(items)
	if err != nil {
		return err
	}
	tok, err := e.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{appInsightsScope}})
	if err != nil {
		return fmt.Errorf("telemetry: signing in to Application Insights: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.target.trackURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("telemetry: sending metrics to Application Insights: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return trackResult(resp.StatusCode, answer, len(items))
}

// trackResult turns the ingestion answer into an error unless every item
// was accepted.
func trackResult(status int, body []byte, sent int) error {
	var tr trackResponse
	_ = json.Unmarshal(body, &tr)
	if status == http.StatusOK && tr.ItemsAccepted == sent {
		return nil
	}
	msg := strings.TrimSpace(string(body))
	if len(tr.Errors) > 0 {
		msg = tr.Errors[0].Message
	}
	return fmt.Errorf("telemetry: Application Insights accepted %d of %d metric items (HTTP %d): %s", tr.ItemsAccepted, sent, status, msg)
}

// envelopes converts the SDK's metrics into telemetry items.
func (e *appInsightsExporter) envelopes(rm *metricdata.ResourceMetrics) []envelope {
	tags := map[string]string{}
	if service, ok := rm.Resource.Set().Value(attribute.Key("service.name")); ok {
		tags["ai.cloud.role"] = service.AsString()
	}
	var out []envelope
	add := func(t time.Time, attrs attribute.Set, p dataPoint) {
		var env envelope
		env.Name = "Microsoft.ApplicationInsights.Metric"
		env.Time = t.UTC().Format(time.RFC3339Nano)
		env.IKey = e.target.iKey
		env.Tags = tags
		env.Data.BaseType = "MetricData"
		env.Data.BaseData = metricsData{Ver: 2, Metrics: []dataPoint{p}, Properties: properties(attrs)}
		out = append(out, env)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			convert(metric.Name, metric.Data, add)
		}
	}
	return out
}

// convert emits one data point per point of a metric's data.
func convert(name string, data metricdata.Aggregation, add func(time.Time, attribute.Set, dataPoint)) {
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		points(name, d.DataPoints, add)
	case metricdata.Sum[float64]:
		points(name, d.DataPoints, add)
	case metricdata.Gauge[int64]:
		points(name, d.DataPoints, add)
	case metricdata.Gauge[float64]:
		points(name, d.DataPoints, add)
	case metricdata.Histogram[int64]:
		histograms(name, d.DataPoints, add)
	case metricdata.Histogram[float64]:
		histograms(name, d.DataPoints, add)
	}
}

func points[N int64 | float64](name string, dps []metricdata.DataPoint[N], add func(time.Time, attribute.Set, dataPoint)) {
	for _, dp := range dps {
		add(dp.Time, dp.Attributes, dataPoint{Name: name, Kind: "Measurement", Value: float64(dp.Value)})
	}
}

func histograms[N int64 | float64](name string, dps []metricdata.HistogramDataPoint[N], add func(time.Time, attribute.Set, dataPoint)) {
	for _, dp := range dps {
		if dp.Count == 0 {
			continue // a delta with nothing recorded
		}
		count := int64(dp.Count)
		point := dataPoint{Name: name, Kind: "Aggregation", Value: float64(dp.Sum), Count: &count}
		if least, ok := dp.Min.Value(); ok {
			minimum := float64(least)
			point.Min = &minimum
		}
		if most, ok := dp.Max.Value(); ok {
			maximum := float64(most)
			point.Max = &maximum
		}
		add(dp.Time, dp.Attributes, point)
	}
}

// properties are the attributes as customDimensions.
func properties(attrs attribute.Set) map[string]string {
	if attrs.Len() == 0 {
		return nil
	}
	out := make(map[string]string, attrs.Len())
	for _, kv := range attrs.ToSlice() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}
