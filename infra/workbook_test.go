package infra

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/decisions"
)

// emitted are the metric names and attribute keys karpfunc's code emits:
// the first argument of every OpenTelemetry instrument constructor, and
// every literal attribute key, in the module's non-test Go files.
func emitted(t *testing.T) (metrics, attrs map[string]bool) {
	t.Helper()
	metrics, attrs = map[string]bool{}, map[string]bool{}
	instrument := regexp.MustCompile(`^(Int64|Float64)(Counter|UpDownCounter|Histogram|Gauge|ObservableCounter|ObservableGauge|ObservableUpDownCounter)$`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (d.Name() == "bin" || d.Name() == "tests" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, _ := strconv.Unquote(lit.Value)
			switch {
			case instrument.MatchString(sel.Sel.Name):
				metrics[s] = true
			case slices.Contains([]string{"String", "Bool", "Int", "Int64", "Float64"}, sel.Sel.Name):
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "attribute" {
					attrs[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return metrics, attrs
}

// workbookQueries are the KQL queries of infra/workbook.json.
func workbookQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("workbook.json")
	if err != nil {
		t.Fatal(err)
	}
	var wb struct {
		Items []struct {
			Type    int `json:"type"`
			Content struct {
				Query string `json:"query"`
			} `json:"content"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &wb); err != nil {
		t.Fatalf("workbook.json: %v", err)
	}
	var out []string
	for _, it := range wb.Items {
		if it.Type == 3 {
			out = append(out, it.Content.Query)
		}
	}
	return out
}

// TestWorkbookUsesWhatTheCodeEmits: every metric a workbook query reads is
// one an instrument declares, every dimension one the code sets, and every
// decision field one a decision record carries; and the panels the issue
// asks for are there.
func TestWorkbookUsesWhatTheCodeEmits(t *testing.T) {
	metrics, attrs := emitted(t)
	if len(metrics) < 10 {
		t.Fatalf("found only %d instruments in the code: the parser no longer matches", len(metrics))
	}
	queries := workbookQueries(t)
	nameRE := regexp.MustCompile(`name\s*(?:==\s*"([^"]+)"|in\s*\(([^)]*)\))`)
	quoted := regexp.MustCompile(`"([^"]+)"`)
	dimRE := regexp.MustCompile(`customDimensions\.(\w+)`)
	fieldRE := regexp.MustCompile(`\bd\.(\w+)`)
	used := map[string]bool{}
	for _, q := range queries {
		for _, m := range nameRE.FindAllStringSubmatch(q, -1) {
			names := []string{m[1]}
			if m[2] != "" {
				names = nil
				for _, n := range quoted.FindAllStringSubmatch(m[2], -1) {
					names = append(names, n[1])
				}
			}
			for _, n := range names {
				used[n] = true
				if !metrics[n] && !strings.HasPrefix(q, "requests") {
					t.Errorf("workbook reads metric %q, which no instrument in the code declares", n)
				}
			}
		}
		for _, m := range dimRE.FindAllStringSubmatch(q, -1) {
			if !attrs[m[1]] {
				t.Errorf("workbook reads dimension %q, which the code never sets", m[1])
			}
		}
		for _, m := range fieldRE.FindAllStringSubmatch(q, -1) {
			if m[1] != "msg" && !slices.Contains(decisions.Fields, m[1]) {
				t.Errorf("workbook reads decision field %q, which decisions.Fields does not list", m[1])
			}
		}
	}
	// The panels, by what they read.
	for _, want := range []string{"karpenter_scheduler_queue_depth", "karpfunc_pods_time_to_capacity_seconds",
		"karpenter_cloudprovider_errors_total", "karpfunc_interruption_notices_total", "karpfunc_messages_total",
		"karpfunc_function_duration_seconds"} {
		if !used[want] {
			t.Errorf("no workbook panel reads %s", want)
		}
	}
	all := strings.Join(queries, "\n")
	for _, want := range []string{`"launch"`, `"interruption"`, `"consolidation"`, "d.pricePerHour", "d.savingsPerHour", "d.capacityType", "d.zone", "d.size"} {
		if !strings.Contains(all, want) {
			t.Errorf("no workbook panel uses %s of the decision records", want)
		}
	}
	// The template fills in what the workbook refers to.
	bicep, err := os.ReadFile("modules/monitoring.bicep")
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := os.ReadFile("workbook.json")
	for _, m := range regexp.MustCompile(`\$\{(\w+)\}`).FindAllStringSubmatch(string(wb), -1) {
		if !strings.Contains(string(bicep), `'\${`+m[1]+`}'`) {
			t.Errorf("workbook.json refers to ${%s}, which monitoring.bicep does not replace", m[1])
		}
	}
}

// emitters maps each instrument name to the process that emits it: the relay
// (relay/) or the Functions (everything else the handler links).
func emitters(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	instrument := regexp.MustCompile(`\.(?:Int64|Float64)(?:Counter|UpDownCounter|Histogram|Gauge|ObservableCounter|ObservableGauge|ObservableUpDownCounter)\(\s*"([^"]+)"`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (d.Name() == "bin" || d.Name() == "tests" || d.Name() == "testdata" || path == "../internal" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		who := "functions"
		if strings.HasPrefix(filepath.ToSlash(path), "../relay/") {
			who = "relay"
		}
		for _, m := range instrument.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = who
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWorkbookTilesHaveDeployedSources (issue 18, item 10): every tile reads
// data that what `azd up` deploys sends, with no extra process: customMetrics
// from the Functions and the relay (pkg/telemetry's Application Insights
// exporter, signed in as their identities, each a Monitoring Metrics
// Publisher), traces and requests from the Functions host, Service Bus
// platform metrics from the provisioned namespace.
func TestWorkbookTilesHaveDeployedSources(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	telemetrySrc := read("../pkg/telemetry/telemetry.go") + read("../pkg/telemetry/appinsights.go")
	funcapp, monitoring, mainBicep := read("modules/functionapp.bicep"), read("modules/monitoring.bicep"), read("main.bicep")
	deployment, postdeploy := read("../relay/chart/templates/deployment.yaml"), read("hooks/postdeploy.go")
	exportsToAI := strings.Contains(telemetrySrc, `EnvAppInsights = "APPLICATIONINSIGHTS_CONNECTION_STRING"`) && strings.Contains(telemetrySrc, "opts.Getenv(EnvAppInsights)")
	publishers := strings.Contains(monitoring, "for principalId in [functionsPrincipalId, relayPrincipalId]") && strings.Contains(mainBicep, "relayPrincipalId: identities.outputs.relayPrincipalId")
	sources := map[string]bool{
		// The handler exports with the app setting the Functions host also reads.
		"functions": exportsToAI && publishers && strings.Contains(funcapp, "APPLICATIONINSIGHTS_CONNECTION_STRING: appInsights.properties.ConnectionString"),
		// The relay gets the connection string from postdeploy through the chart.
		"relay": exportsToAI && publishers && strings.Contains(deployment, "name: APPLICATIONINSIGHTS_CONNECTION_STRING") &&
			strings.Contains(postdeploy, `"applicationInsights": map[string]any{"connectionString": env[envAppInsights]}`) &&
			strings.Contains(mainBicep, "output APPLICATIONINSIGHTS_CONNECTION_STRING "),
		// The Functions host writes traces (the handler's logs, decision records) and requests, with Entra ID.
		"host": strings.Contains(funcapp, "APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'"),
	}
	by := emitters(t)
	nameRE := regexp.MustCompile(`name\s*(?:==\s*"([^"]+)"|in\s*\(([^)]*)\))`)
	for _, q := range workbookQueries(t) {
		table := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(q, "let d = "), "|", 2)[0])
		switch table {
		case "customMetrics":
			for _, m := range nameRE.FindAllStringSubmatch(q, -1) {
				for _, n := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(`"`+m[1]+`"`+m[2], -1) {
					if n[1] == "" {
						continue
					}
					who, ok := by[n[1]]
					if !ok {
						t.Errorf("tile reads metric %s, which no instrument declares", n[1])
					} else if !sources[who] {
						t.Errorf("tile reads metric %s from the %s, which azd up does not set up to send metrics to Application Insights", n[1], who)
					}
				}
			}
		case "traces", "requests":
			if !sources["host"] {
				t.Errorf("tile reads %s, which the Functions host does not send with Entra ID", table)
			}
		default:
			t.Errorf("tile query reads %q, a table this test does not know a deployed source for", table)
		}
	}
	// The Service Bus tile (metrics of the provisioned namespace).
	if !strings.Contains(read("workbook.json"), `${serviceBusNamespaceId}`) || !strings.Contains(mainBicep, "serviceBusNamespaceId: serviceBus.outputs.namespaceId") {
		t.Error("the dead-letter tile does not read the provisioned Service Bus namespace")
	}
}

// TestDecisionRecordsNotSampled: the workbook counts and sums decision
// records, so none may be sampled away. They are the handler's JSON lines
// on stderr (pkg/decisions, slog at Info), which the Functions host logs
// under Host.Function.Console (azure-functions-host
// src/WebJobs.Script/Workers/WorkerConsoleLogService.cs) and Application
// Insights stores as traces: telemetry type Trace. host.json's adaptive
// sampling (on unless isEnabled is false) applies to every type but those
// in samplingSettings.excludedTypes, or only to includedTypes when set
// (Learn, "host.json reference for Azure Functions 2.x and later",
// applicationInsights.samplingSettings); logLevel must let Information
// through for that category.
func TestDecisionRecordsNotSampled(t *testing.T) {
	b, err := os.ReadFile("../host.json")
	if err != nil {
		t.Fatal(err)
	}
	var host struct {
		Logging struct {
			LogLevel            map[string]string `json:"logLevel"`
			ApplicationInsights struct {
				SamplingSettings struct {
					IsEnabled     *bool  `json:"isEnabled"`
					ExcludedTypes string `json:"excludedTypes"`
					IncludedTypes string `json:"includedTypes"`
				} `json:"samplingSettings"`
			} `json:"applicationInsights"`
		} `json:"logging"`
	}
	if err := json.Unmarshal(b, &host); err != nil {
		t.Fatalf("host.json: %v", err)
	}
	types := func(list string) []string {
		var out []string
		for _, s := range strings.Split(list, ";") {
			out = append(out, strings.ToLower(strings.TrimSpace(s)))
		}
		return out
	}
	s := host.Logging.ApplicationInsights.SamplingSettings
	sampled := s.IsEnabled == nil || *s.IsEnabled
	if sampled && !slices.Contains(types(s.ExcludedTypes), "trace") &&
		(s.IncludedTypes == "" || slices.Contains(types(s.IncludedTypes), "trace")) {
		t.Errorf("host.json samples Trace telemetry (excludedTypes %q, includedTypes %q): decision records are traces, and the workbook's counts and sums would be low; add Trace to excludedTypes",
			s.ExcludedTypes, s.IncludedTypes)
	}
	// The most specific category prefix decides, as in .NET logging.
	for _, category := range []string{"Host.Function.Console", "Host.Function", "Host", "default"} {
		if level, ok := host.Logging.LogLevel[category]; ok {
			if !slices.Contains([]string{"trace", "debug", "information"}, strings.ToLower(level)) {
				t.Errorf("host.json logLevel %s = %s drops the Information-level decision records", category, level)
			}
			break
		}
	}
}
