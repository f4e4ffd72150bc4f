// Package telemetry sets up OpenTelemetry for karpfunc's processes: metrics
// and traces exported over OTLP/HTTP when the standard OTEL_EXPORTER_OTLP_*
// settings are present, metrics sent to Application Insights (customMetrics,
// Entra ID sign-in) when APPLICATIONINSIGHTS_CONNECTION_STRING is, metrics
// served for Prometheus where a process asks for it (the relay), and W3C
// trace context carried in a message's application properties.
//
// Invariants:
//   - Telemetry never fails the work it observes. A setting that cannot be
//     used, an endpoint that is down or slow, an export that is refused: each
//     is one log line, and the process goes on (without that signal).
//   - Nothing is exported unless configured: with no OTLP endpoint the
//     providers are OpenTelemetry's no-ops and instruments cost nothing.
//   - Flush is bounded (FlushTimeout), so a Function that flushes before
//     returning (an instance may be frozen right after) never waits long on
//     a collector that does not answer.
//
// Instruments are declared per package (metrics.go) against the global
// providers; OpenTelemetry's globals delegate instruments created before
// Setup to the providers Setup installs.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard OpenTelemetry settings Setup reads (the exporters read the
// rest of OTEL_EXPORTER_OTLP_*: headers, timeout, compression).
const (
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvMetricsProtocol = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
	EnvServiceName     = "OTEL_SERVICE_NAME"
)

// FlushTimeout bounds one Flush.
const FlushTimeout = 5 * time.Second

// Options configure Setup.
type Options struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME says otherwise.
	ServiceName string
	// Getenv reads settings (default: none set).
	Getenv func(string) string
	// Prometheus adds a Prometheus reader; Telemetry.MetricsHandler serves it.
	Prometheus bool
	// Logger receives the lines telemetry failures become (default slog.Default()).
	Logger *slog.Logger
	// Credential signs in to Application Insights (default: azidentity's
	// DefaultAzureCredential: the Functions' managed identity by
	// AZURE_CLIENT_ID, the relay's workload identity).
	Credential azcore.TokenCredential
	// AppInsightsClient sends to Application Insights (default: a client
	// with a 30s timeout).
	AppInsightsClient *http.Client
}

// Telemetry is what Setup installed.
type Telemetry struct {
	log     *slog.Logger
	meters  *sdkmetric.MeterProvider // nil: no metrics SDK installed
	tracers *sdktrace.TracerProvider // nil: no traces exported
	metrics http.Handler
	// OTLP says whether anything is exported over OTLP.
	OTLP bool
	// AppInsights says whether metrics are sent to Application Insights.
	AppInsights bool
}

// Setup installs the global meter and tracer providers and the W3C trace
// context propagator. A setting it cannot use is returned as an error
// naming it, together with a usable Telemetry (with that signal off): the
// caller logs the error and goes on.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	tel := &Telemetry{log: opts.Logger}
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		tel.log.Warn("telemetry: export failed; the work goes on without it", "error", err)
	}))
	if strings.EqualFold(strings.TrimSpace(opts.Getenv(EnvSDKDisabled)), "true") {
		return tel, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", opts.ServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES still yields the rest.
		opts.Logger.Warn("telemetry: reading resource attributes", "error", err)
	}
	errs := tel.setupMetrics(ctx, opts, res)
	if err := tel.setupTraces(ctx, opts, res); err != nil {
		errs = append(errs, err)
	}
	return tel, errors.Join(errs...)
}

// setupMetrics installs a meter provider with every metric reader the
// options and settings ask for (none: no provider), and returns the
// settings it could not use.
func (t *Telemetry) setupMetrics(ctx context.Context, opts Options, res *resource.Resource) []error {
	var readers metricReaders
	if opts.Prometheus {
		readers.add(t.prometheusReader())
	}
	if readers.add(otlpMetricReader(ctx, opts.Getenv)) {
		t.OTLP = true
	}
	t.AppInsights = readers.add(appInsightsReader(opts))
	if len(readers.options) > 0 {
		t.meters = sdkmetric.NewMeterProvider(append(readers.options, sdkmetric.WithResource(res))...)
		otel.SetMeterProvider(t.meters)
	}
	return readers.errs
}

// metricReaders gathers the meter provider's readers and the errors of
// those that could not be made.
type metricReaders struct {
	options []sdkmetric.Option
	errs    []error
}

// add keeps reader, or err, and says whether a reader was kept.
func (m *metricReaders) add(reader sdkmetric.Reader, err error) bool {
	if err != nil {
		m.errs = append(m.errs, err)
		return false
	}
	if reader == nil {
		return false
	}
	m.options = append(m.options, sdkmetric.WithReader(reader))
	return true
}

// prometheusReader is the reader behind the Telemetry's /metrics handler.
func (t *Telemetry) prometheusReader() (sdkmetric.Reader, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutUnits(),
		otelprom.WithoutCounterSuffixes(), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: Prometheus exporter: %w", err)
	}
	t.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return exp, nil
}

// otlpMetricReader is the periodic reader exporting metrics over OTLP (nil
// when no endpoint is set).
func otlpMetricReader(ctx context.Context, getenv func(string) string) (sdkmetric.Reader, error) {
	on, err := signalOn(getenv, EnvMetricsEndpoint, EnvMetricsProtocol)
	if err != nil || !on {
		return nil, err
	}
	exp, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP metric exporter: %w", err)
	}
	return sdkmetric.NewPeriodicReader(exp), nil
}

// setupTraces installs a tracer provider exporting over OTLP when an
// endpoint is set.
func (t *Telemetry) setupTraces(ctx context.Context, opts Options, res *resource.Resource) error {
	on, err := signalOn(opts.Getenv, EnvTracesEndpoint, EnvTracesProtocol)
	if err != nil || !on {
		return err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	t.tracers = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(t.tracers)
	t.OTLP = true
	return nil
}

// appInsightsReader is the periodic reader sending metrics to the
// Application Insights resource EnvAppInsights names (nil when unset).
func appInsightsReader(opts Options) (sdkmetric.Reader, error) {
	connection := strings.TrimSpace(opts.Getenv(EnvAppInsights))
	if connection == "" {
		return nil, nil
	}
	cred := opts.Credential
	if cred == nil {
		defaultCred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("telemetry: no credential for Application Insights (%s is set): %w", EnvAppInsights, err)
		}
		cred = defaultCred
	}
	exp, err := newAppInsightsExporter(connection, cred, opts.AppInsightsClient)
	if err != nil {
		return nil, err
	}
	return sdkmetric.NewPeriodicReader(exp), nil
}

// signalOn reports whether a signal is exported over OTLP: its own endpoint
// or the common one is set. Only OTLP/HTTP with protobuf is built in; any
// other protocol is refused by name rather than ignored.
func signalOn(getenv func(string) string, endpointVar, protocolVar string) (bool, error) {
	name := endpointVar
	endpoint := strings.TrimSpace(getenv(endpointVar))
	if endpoint == "" {
		name = EnvEndpoint
		endpoint = strings.TrimSpace(getenv(EnvEndpoint))
	}
	if endpoint == "" {
		return false, nil
	}
	if parsed, err := url.Parse(endpoint); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return false, fmt.Errorf("telemetry: %s=%q is not an http(s) URL such as http://collector:4318; this signal is not exported", name, endpoint)
	}
	for _, variable := range []string{protocolVar, EnvProtocol} {
		if value := strings.TrimSpace(getenv(variable)); value != "" {
			if value != "http/protobuf" {
				return false, fmt.Errorf("telemetry: %s=%q: karpfunc exports OTLP over HTTP only; set it to http/protobuf (or unset it); this signal is not exported", variable, value)
			}
			break
		}
	}
	return true, nil
}

// MetricsHandler serves the Prometheus exposition (nil without Options.Prometheus).
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// Flush exports what is buffered, within FlushTimeout. A failure is logged,
// never returned: a Function flushes before answering the host, and its
// work is done whether or not the collector took the telemetry.
func (t *Telemetry) Flush(ctx context.Context) {
	if t == nil || (!t.OTLP && !t.AppInsights) {
		return
	}
	// Each signal gets half: a collector that is down must not starve the
	// other signal's exporter of its whole budget.
	flush := func(what string, f func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout/2)
		defer cancel()
		if err := f(ctx); err != nil {
			t.log.Warn("telemetry: flushing "+what+" failed; the work goes on without them", "error", err)
		}
	}
	if t.tracers != nil {
		flush("traces", t.tracers.ForceFlush)
	}
	if t.meters != nil {
		flush("metrics", t.meters.ForceFlush)
	}
}

// Shutdown flushes and stops the providers (at process exit).
func (t *Telemetry) Shutdown(ctx context.Context) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
	defer cancel()
	if t.tracers != nil {
		if err := t.tracers.Shutdown(ctx); err != nil {
			t.log.Warn("telemetry: stopping traces", "error", err)
		}
	}
	if t.meters != nil {
		if err := t.meters.Shutdown(ctx); err != nil {
			t.log.Warn("telemetry: stopping metrics", "error", err)
		}
	}
}
