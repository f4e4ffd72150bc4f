// Package infra holds the Bicep templates `azd up` deploys. There is no Bicep
// compiler here, so these tests read the .bicep text: parameters used and
// passed, outputs the hooks read, role IDs, API versions, no secret outputs,
// and the Function App's app settings against what the code reads.
package infra

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// builtInRoles are the Azure built-in role definition IDs the templates use,
// as Microsoft's "Azure built-in roles" reference lists them, with the name
// of the Bicep variable that must hold each.
var builtInRoles = map[string]struct{ name, variable string }{
	"9980e02c-c2be-4d73-94e8-173b1dc7cf3c": {"Virtual Machine Contributor", "virtualMachineContributor"},
	"f1a07417-d97a-45cb-824c-7a7467783830": {"Managed Identity Operator", "managedIdentityOperator"},
	"69a216fc-b8fb-44d8-bc22-1f3c2cd27a39": {"Azure Service Bus Data Sender", "dataSender"},
	"090c5cfd-751d-490a-894a-3ce6f1109419": {"Azure Service Bus Data Owner", "dataOwner"},
	"b7e6dc6d-f1e8-4753-8033-0f276bb0955b": {"Storage Blob Data Owner", "storageBlobDataOwner"},
	"3913510d-42f4-4e42-8a64-420c390055eb": {"Monitoring Metrics Publisher", "monitoringMetricsPublisher"},
	"4abbcc35-e782-43d8-92c5-2d3f1bd2253f": {"Azure Kubernetes Service Cluster User Role", "aksClusterUserRole"},
	"acdd72a7-3385-48ef-bd42-f606fba81ae7": {"Reader", "reader"},
	// ==== deployer rights: built-in roles replacing custom ones, and the registry's ====
	"4d97b98b-1d4f-4787-a291-c67834d212e7": {"Network Contributor", "networkContributor"},
	"7f951dda-4ed3-4680-a7ca-43fe172d538d": {"AcrPull", "acrPull"},
	"8311e382-0749-4cb8-b61a-304f252e45ec": {"AcrPush", "acrPush"},
	// ==== end deployer rights ====
}

type bicepFile struct {
	path, text string
	params     map[string]bool // name -> has a default
	outputs    map[string]string
}

var (
	paramRE  = regexp.MustCompile(`(?m)^param (\w+) [\w.<>'@-]+( =)?`)
	outputRE = regexp.MustCompile(`(?m)^output (\w+) \w+ = (.*)$`)
	moduleRE = regexp.MustCompile(`(?m)^module (\w+) '([^']+)' = `)
	typeRE   = regexp.MustCompile(`'([A-Za-z]+\.[A-Za-z]+/[A-Za-z/]+)@([^']+)'`)
	guidRE   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
)

func load(t *testing.T, path string) *bicepFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &bicepFile{path: path, text: string(b), params: map[string]bool{}, outputs: map[string]string{}}
	for _, m := range paramRE.FindAllStringSubmatch(f.text, -1) {
		f.params[m[1]] = m[2] != ""
	}
	for _, m := range outputRE.FindAllStringSubmatch(f.text, -1) {
		f.outputs[m[1]] = m[2]
	}
	return f
}

func allFiles(t *testing.T) []*bicepFile {
	t.Helper()
	paths, err := filepath.Glob("modules/*.bicep")
	if err != nil {
		t.Fatal(err)
	}
	var out []*bicepFile
	for _, p := range append([]string{"main.bicep"}, paths...) {
		out = append(out, load(t, p))
	}
	return out
}

// block returns the text between the braces that open at or after i.
func block(t *testing.T, text string, i int) string {
	t.Helper()
	start := strings.Index(text[i:], "{")
	if start < 0 {
		t.Fatalf("no block after offset %d", i)
	}
	depth := 0
	for j := i + start; j < len(text); j++ {
		switch text[j] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return text[i+start+1 : j]
			}
		}
	}
	t.Fatalf("unbalanced block at offset %d", i)
	return ""
}

// topKeys are the keys at the first level of an object block.
func topKeys(body string) []string {
	var keys []string
	depth := 0
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if depth == 0 {
			if k, _, ok := strings.Cut(trimmed, ":"); ok && regexp.MustCompile(`^'?[\w.]+'?$`).MatchString(k) {
				keys = append(keys, strings.Trim(k, "'"))
			}
		}
		depth += strings.Count(line, "{") + strings.Count(line, "[") - strings.Count(line, "}") - strings.Count(line, "]")
	}
	return keys
}

func TestEveryParamIsUsed(t *testing.T) {
	for _, f := range allFiles(t) {
		for p := range f.params {
			uses := regexp.MustCompile(`\b`+p+`\b`).FindAllStringIndex(f.text, -1)
			if len(uses) < 2 {
				t.Errorf("%s: param %s is never used", f.path, p)
			}
		}
	}
}

// TestModulesGetTheirParams: every module call passes only parameters the
// module declares, and every one it requires; every module output read
// exists.
func TestModulesGetTheirParams(t *testing.T) {
	mods := map[string]*bicepFile{}
	for _, f := range allFiles(t) {
		for _, m := range moduleRE.FindAllStringSubmatchIndex(f.text, -1) {
			symbol, path := f.text[m[2]:m[3]], f.text[m[4]:m[5]]
			mod := load(t, filepath.Join(filepath.Dir(f.path), path))
			mods[symbol] = mod
			body := block(t, f.text, m[1])
			pi := strings.Index(body, "params:")
			if pi < 0 {
				t.Fatalf("%s: module %s passes no params", f.path, symbol)
			}
			passed := map[string]bool{}
			for _, k := range topKeys(block(t, body, pi)) {
				passed[k] = true
				if _, ok := mod.params[k]; !ok {
					t.Errorf("%s: module %s passes %s, which %s does not declare", f.path, symbol, k, path)
				}
			}
			for p, hasDefault := range mod.params {
				if !hasDefault && !passed[p] {
					t.Errorf("%s: module %s does not pass %s, which %s requires", f.path, symbol, p, path)
				}
			}
		}
		for _, m := range regexp.MustCompile(`\b(\w+)\.outputs\.(\w+)`).FindAllStringSubmatch(f.text, -1) {
			mod, ok := mods[m[1]]
			if !ok {
				t.Errorf("%s: %s.outputs.%s reads an unknown module", f.path, m[1], m[2])
				continue
			}
			if _, ok := mod.outputs[m[2]]; !ok {
				t.Errorf("%s: %s.outputs.%s: %s has no output %s", f.path, m[1], m[2], mod.path, m[2])
			}
		}
	}
}

// TestParametersFile: main.parameters.json sets exactly main.bicep's
// parameters (those without a default at least), from azd's built-in values,
// values the preprovision hook writes, or values with a default.
func TestParametersFile(t *testing.T) {
	main := load(t, "main.bicep")
	var pf struct {
		Parameters map[string]struct {
			Value any `json:"value"`
		} `json:"parameters"`
	}
	b, err := os.ReadFile("main.parameters.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pf); err != nil {
		t.Fatal(err)
	}
	hookSets := hookConstants(t, "hooks/preprovision.go")
	// AZURE_PRINCIPAL_ID: azd sets it to the signed-in principal's object ID.
	azdBuiltIn := map[string]bool{"AZURE_ENV_NAME": true, "AZURE_LOCATION": true, "AZURE_SUBSCRIPTION_ID": true, "AZURE_PRINCIPAL_ID": true}
	userSets := map[string]bool{"AZURE_AKS_CLUSTER_NAME": true, "AZURE_AKS_RESOURCE_GROUP": true}
	for name, p := range pf.Parameters {
		if _, ok := main.params[name]; !ok {
			t.Errorf("main.parameters.json sets %s, which main.bicep does not declare", name)
		}
		s, _ := p.Value.(string)
		for _, m := range regexp.MustCompile(`\$\{(\w+)(=[^}]*)?\}`).FindAllStringSubmatch(s, -1) {
			v, hasDefault := m[1], m[2] != ""
			// With a default: a user option (KARPFUNC_*) or a value the hook
			// may leave empty (AZURE_AKS_*, which it must still write).
			userOption := hasDefault && strings.HasPrefix(v, "KARPFUNC_")
			if !userOption && !azdBuiltIn[v] && !userSets[v] && !hookSets[v] {
				t.Errorf("parameter %s reads ${%s}, which neither azd, the user's required settings nor the preprovision hook sets", name, v)
			}
		}
	}
	for name, hasDefault := range main.params {
		if _, ok := pf.Parameters[name]; !ok && !hasDefault {
			t.Errorf("main.bicep requires %s; main.parameters.json does not set it", name)
		}
	}
}

// hookConstants are the string constants of a hooks file that name
// environment values (AZURE_*, KARPFUNC_*, APPLICATIONINSIGHTS_*).
func hookConstants(t *testing.T, path string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && regexp.MustCompile(`^(AZURE|KARPFUNC|APPLICATIONINSIGHTS)_[A-Z_]+$`).MatchString(s) {
				out[s] = true
			}
		}
		return true
	})
	return out
}

// TestOutputsTheHooksRead: every value the postdeploy hook reads is a
// main.bicep output or a value set before provisioning, and every output is
// read by azd or a hook.
func TestOutputsTheHooksRead(t *testing.T) {
	main := load(t, "main.bicep")
	reads := hookConstants(t, "hooks/postdeploy.go")
	before := hookConstants(t, "hooks/preprovision.go")
	optional := map[string]bool{"KARPFUNC_RELAY_IMAGE": true, "KARPFUNC_OTLP_ENDPOINT": true} // set by the user (azd env set)
	for v := range reads {
		if _, ok := main.outputs[v]; !ok && !before[v] && !optional[v] {
			t.Errorf("hooks/postdeploy.go reads %s: no main.bicep output and not set before provisioning", v)
		}
	}
	// Outputs for the person deploying (the README's commands use them).
	forUsers := map[string]bool{"AZURE_FUNCTION_APP_NAME": true, "APPLICATIONINSIGHTS_NAME": true}
	for o := range main.outputs {
		readByAzd := o == "AZURE_RESOURCE_GROUP" || strings.HasPrefix(o, "SERVICE_")
		if !readByAzd && !reads[o] && !forUsers[o] {
			t.Errorf("output %s is read by neither azd nor a hook", o)
		}
	}
}

func TestNoSecretOutputs(t *testing.T) {
	secret := regexp.MustCompile(`(?i)listkeys|listcredential|connectionstring|primarykey|secondarykey|password|secret|sas`)
	// An Application Insights connection string is not a secret: "Ikey unique
	// identifiers aren't security tokens or security keys, and aren't
	// considered secrets" (Learn: "Connection strings in Application
	// Insights"); with local auth off it admits only Entra ID senders.
	notSecret := map[string]bool{"APPLICATIONINSIGHTS_CONNECTION_STRING": true, "connectionString": true}
	for _, f := range allFiles(t) {
		for name, expr := range f.outputs {
			aiConnection := notSecret[name] && strings.HasSuffix(strings.ToLower(expr), "connectionstring") && !strings.Contains(strings.ToLower(expr), "list")
			if !aiConnection && (secret.MatchString(name) || secret.MatchString(expr)) {
				t.Errorf("%s: output %s = %s looks like a secret", f.path, name, expr)
			}
		}
		if strings.Contains(f.text, "@secure()\noutput") {
			t.Errorf("%s: a secure output", f.path)
		}
	}
}

// TestAPIVersionsPinned: every resource type names a dated, GA API version,
// the same one wherever the type appears.
func TestAPIVersionsPinned(t *testing.T) {
	seen := map[string]string{}
	for _, f := range allFiles(t) {
		for _, m := range typeRE.FindAllStringSubmatch(f.text, -1) {
			typ, ver := m[1], m[2]
			if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(ver) {
				t.Errorf("%s: %s@%s is not a dated GA API version", f.path, typ, ver)
			}
			if prev, ok := seen[typ]; ok && prev != ver {
				t.Errorf("%s: %s@%s, elsewhere @%s", f.path, typ, ver, prev)
			}
			seen[typ] = ver
		}
		if strings.Contains(f.text, "br/public:") || strings.Contains(f.text, ":latest") {
			t.Errorf("%s: registry module or :latest reference", f.path)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("found only %d resource types: the pattern no longer matches", len(seen))
	}
}

// TestRoleDefinitionIDs: every GUID in the templates is a documented
// built-in role held by the variable named for it, and every such role is
// assigned.
func TestRoleDefinitionIDs(t *testing.T) {
	used := map[string]bool{}
	for _, f := range allFiles(t) {
		for _, line := range strings.Split(f.text, "\n") {
			for _, g := range guidRE.FindAllString(line, -1) {
				role, ok := builtInRoles[strings.ToLower(g)]
				if !ok {
					t.Errorf("%s: %s is not a built-in role this test knows; add it with its documented name", f.path, g)
					continue
				}
				used[strings.ToLower(g)] = true
				want := "var " + role.variable + " = '" + g + "'"
				if strings.TrimSpace(line) != want {
					t.Errorf("%s: %q: want %q (%s)", f.path, strings.TrimSpace(line), want, role.name)
				}
				if !regexp.MustCompile(`roleDefinitions', ` + role.variable + `\)|role: ` + role.variable + ` `).MatchString(f.text) {
					t.Errorf("%s: %s (%s) is declared but assigned nowhere", f.path, role.variable, role.name)
				}
			}
		}
	}
	for g, r := range builtInRoles {
		if !used[g] {
			t.Errorf("role %s (%s) is in the table but no template uses it", r.name, g)
		}
	}
}

// appSettings are the Function App's app settings, key -> expression.
func appSettings(t *testing.T) map[string]string {
	t.Helper()
	f := load(t, "modules/functionapp.bicep")
	i := strings.Index(f.text, "name: 'appsettings'")
	if i < 0 {
		t.Fatal("functionapp.bicep has no appsettings")
	}
	body := block(t, f.text, strings.Index(f.text[i:], "properties:")+i)
	out := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(k, "//") {
			out[k] = strings.TrimSpace(v)
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d app settings: the parser no longer matches", len(out))
	}
	return out
}

// codeSettings are the environment variables the handler's code reads: the
// Env* string constants and literal Getenv/LookupEnv arguments in every
// package of this module the handler binary is built from.
func codeSettings(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Dir}}{{end}}", "../functions").Output()
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(path, "github.com/karpfunc/karpfunc/") {
			continue
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			for fname, f := range p.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.ValueSpec:
						for i, id := range n.Names {
							if strings.HasPrefix(id.Name, "Env") && i < len(n.Values) {
								if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
									s, _ := strconv.Unquote(lit.Value)
									reads[s] = fname
								}
							}
						}
					case *ast.CallExpr:
						sel, ok := n.Fun.(*ast.SelectorExpr)
						if ok && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv") && len(n.Args) == 1 {
							if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								s, _ := strconv.Unquote(lit.Value)
								reads[s] = fname
							}
						}
					}
					return true
				})
			}
		}
	}
	return reads
}

// notInAzure are settings the code reads that the template must not set,
// each with the reason.
var notInAzure = map[string]string{
	"KARPFUNC_LOCAL_BUS_URL":                "the local Functions host's bus (development)",
	bus.EnvLocalBusCredential:               "the local bus's token for the identity (development)",
	bus.EnvServiceBusConnection:             "a Service Bus connection string; Azure uses the identity (__fullyQualifiedNamespace)",
	"ARM_ENDPOINT":                          "the ARM emulator (development)",
	"ARM_CA_FILE":                           "the ARM emulator's CA (development)",
	"ARM_TOKEN":                             "a static ARM token for the emulator (development)",
	"KARPFUNC_CATALOG_FILE":                 "replaces the embedded catalog; Azure uses the embedded one",
	"AZURE_FEDERATED_TOKEN_FILE":            "set by the workload identity webhook in the relay's pod, never on the Function App",
	"FUNCTIONS_CUSTOMHANDLER_PORT":          "set by the Functions host",
	"FUNCTIONS_HTTPWORKER_PORT":             "set by the Functions host",
	"KUBECONFIG":                            "a kubeconfig file (local runs); in Azure the Functions sign in as their identity (KARPFUNC_API_SERVER_URL/CA)",
	"KARPFUNC_NODE_REPAIR_READY_TOLERATION": "shortens node repair's Ready toleration for tests; Azure keeps the provider's 10 minutes",
}

// readByPlatform are settings the template sets for the Functions host or
// the Azure SDK rather than for karpfunc's code.
var readByPlatform = map[string]string{
	"AzureWebJobsStorage__accountName":          "Functions host storage",
	"AzureWebJobsStorage__credential":           "Functions host storage",
	"AzureWebJobsStorage__clientId":             "Functions host storage",
	"APPLICATIONINSIGHTS_CONNECTION_STRING":     "Functions host telemetry (no key: local auth is off)",
	"APPLICATIONINSIGHTS_AUTHENTICATION_STRING": "Functions host telemetry as the identity",
	"ServiceBusConnection__credential":          "Service Bus trigger identity connection",
	"AZURE_CLIENT_ID":                           "azidentity: which user-assigned identity",
	"GOMEMLIMIT":                                "the Go runtime's memory limit; pkg/snapshot's budget is half of it",
}

// functionBindings are the %SETTING% queue names of the function.json
// files, with the trigger's session setting.
func functionBindings(t *testing.T) map[string]bool { return bindingSettings(t, true) }

// scheduleBindings are the %SETTING% timer schedules of the function.json
// files.
func scheduleBindings(t *testing.T) map[string]bool { return bindingSettings(t, false) }

func bindingSettings(t *testing.T, queues bool) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../functions/*/function.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no function.json files: %v", err)
	}
	out := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fj struct {
			Bindings []struct {
				Type      string `json:"type"`
				QueueName string `json:"queueName"`
				Sessions  bool   `json:"isSessionsEnabled"`
				Schedule  string `json:"schedule"`
			} `json:"bindings"`
		}
		if err := json.Unmarshal(b, &fj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, bd := range fj.Bindings {
			v := bd.QueueName
			if !queues {
				v = bd.Schedule
			}
			if m := regexp.MustCompile(`^%(\w+)%$`).FindStringSubmatch(v); m != nil {
				out[m[1]] = bd.Sessions
			}
		}
	}
	return out
}

func TestAppSettingsMatchTheCode(t *testing.T) {
	settings := appSettings(t)
	code := codeSettings(t)
	bindings := functionBindings(t)
	for name := range scheduleBindings(t) {
		bindings[name] = false
	}
	for name, where := range code {
		if _, set := settings[name]; set {
			if reason, ok := notInAzure[name]; ok {
				t.Errorf("app setting %s is set, but must not be in Azure: %s", name, reason)
			}
			continue
		}
		if _, ok := notInAzure[name]; !ok {
			t.Errorf("%s reads %s; functionapp.bicep does not set it", where, name)
		}
	}
	for name := range notInAzure {
		if _, ok := code[name]; !ok {
			t.Errorf("notInAzure lists %s, which no code reads any more: remove it", name)
		}
	}
	for name := range bindings {
		if _, ok := settings[name]; !ok {
			t.Errorf("a function.json binds %%%s%%; functionapp.bicep does not set it", name)
		}
	}
	// Read by changes landing in parallel: the Interruption function's
	// binding, and the handler's sign-in to AKS (pkg/kubeauth) and NAP guard
	// (functions/nap.go).
	pendingBindings := map[string]bool{"INTERRUPTION_QUEUE": true, "KARPFUNC_API_SERVER_URL": true,
		"KARPFUNC_API_SERVER_CA": true, "KARPFUNC_NODE_PROVISIONING_MODE": true}
	var unread []string
	for name := range settings {
		_, byCode := code[name]
		_, byPlatform := readByPlatform[name]
		_, byBinding := bindings[name]
		if !byCode && !byPlatform && !byBinding && !pendingBindings[name] {
			unread = append(unread, name)
		}
	}
	sort.Strings(unread)
	if len(unread) > 0 {
		t.Errorf("app settings nothing reads: %v", unread)
	}
}

// TestQueues: the template's queues are pkg/bus's, and each trigger's session
// setting matches its queue's.
func TestQueues(t *testing.T) {
	sb := load(t, "modules/servicebus.bicep")
	specs := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{ name: '(\w+)', sessions: (true|false) \}`).FindAllStringSubmatch(sb.text, -1) {
		specs[m[1]] = m[2] == "true"
	}
	for _, q := range []string{bus.QueueProvision, bus.QueueLifecycle, bus.QueueInterruption, bus.QueueDisruption} {
		if _, ok := specs[q]; !ok {
			t.Errorf("servicebus.bicep has no queue %s", q)
		}
	}
	settings := appSettings(t)
	for setting, sessions := range functionBindings(t) {
		m := regexp.MustCompile(`^queues\.(\w+)$`).FindStringSubmatch(settings[setting])
		if m == nil {
			t.Errorf("app setting %s = %q: want queues.<name>", setting, settings[setting])
			continue
		}
		if got, ok := specs[m[1]]; !ok || got != sessions {
			t.Errorf("%%%s%% binds queue %s with isSessionsEnabled=%v; the queue has sessions=%v (declared %v)", setting, m[1], sessions, got, ok)
		}
	}
	if specs[bus.QueueInterruption] {
		t.Error("the interruption queue has sessions; Event Grid cannot deliver to it")
	}
}

// TestAzureYAML: azd deploys the directory `make package` stages, with the
// custom language (azd builds nothing), and every hook names a hook the
// hooks program has.
func TestAzureYAML(t *testing.T) {
	b, err := os.ReadFile("../azure.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var az struct {
		Infra struct{ Path, Module string }
		Hooks map[string]struct {
			Shell, Run string
		}
		Services map[string]struct {
			Project, Dist, Language, Host string
		}
	}
	if err := yaml.Unmarshal(b, &az); err != nil {
		t.Fatal(err)
	}
	if az.Infra.Path != "infra" || az.Infra.Module != "main" {
		t.Errorf("infra = %+v, want infra/main", az.Infra)
	}
	fn, ok := az.Services["functions"]
	if !ok {
		t.Fatal("azure.yaml has no functions service")
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if fn.Host != "function" || fn.Language != "custom" || fn.Project != "./dist/app" || fn.Dist != fn.Project ||
		!strings.Contains(string(makefile), "-o dist/app/handler") {
		t.Errorf("functions service = %+v: want host function, language custom, project and dist ./dist/app (make package's output)", fn)
	}
	if !strings.Contains(load(t, "modules/functionapp.bicep").text, "'azd-service-name': 'functions'") {
		t.Error("the Function App is not tagged azd-service-name: functions")
	}
	hooksMain, err := os.ReadFile("hooks/main.go")
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range az.Hooks {
		switch {
		case h.Run == "make package":
		case strings.HasPrefix(h.Run, "go run ./infra/hooks "):
			arg := strings.TrimPrefix(h.Run, "go run ./infra/hooks ")
			if arg != name || !strings.Contains(string(hooksMain), `case "`+arg+`":`) {
				t.Errorf("hook %s runs %q: infra/hooks has no such hook", name, h.Run)
			}
		default:
			t.Errorf("hook %s runs %q: unexpected", name, h.Run)
		}
	}
	for _, want := range []string{"preprovision", "prepackage", "predeploy", "postdeploy", "predown"} {
		if _, ok := az.Hooks[want]; !ok {
			t.Errorf("azure.yaml has no %s hook", want)
		}
	}
}

// TestDeployableWithBuiltInRoles (issue 18, item 5): the template defines no
// custom role, so Contributor plus Role Based Access Control Administrator
// (which cannot write Microsoft.Authorization/roleDefinitions) can deploy it;
// the node subnet join is the built-in Network Contributor on that subnet.
func TestDeployableWithBuiltInRoles(t *testing.T) {
	for _, f := range allFiles(t) {
		if strings.Contains(f.text, "'Microsoft.Authorization/roleDefinitions@") || strings.Contains(f.text, "'CustomRole'") {
			t.Errorf("%s defines a custom role; the documented deployer rights (Contributor + RBAC Administrator) cannot create it", f.path)
		}
	}
	subnet := load(t, "modules/subnet-access.bicep")
	if !strings.Contains(subnet.text, "roleDefinitions', networkContributor)") || !strings.Contains(subnet.text, "scope: subnet") {
		t.Error("subnet-access.bicep does not assign Network Contributor on the node subnet")
	}
}

// TestHealthTopicReused (issue 18, item 5): a subscription's existing
// HealthResources system topic (preprovision finds it) is reused, not
// created again; environments sharing it keep separate event subscriptions.
func TestHealthTopicReused(t *testing.T) {
	main := load(t, "main.bicep")
	if _, ok := main.params["healthResourcesTopicId"]; !ok {
		t.Fatal("main.bicep takes no healthResourcesTopicId: an existing HealthResources topic would be created again (and fail)")
	}
	pf, _ := os.ReadFile("main.parameters.json")
	if !strings.Contains(string(pf), `"healthResourcesTopicId": { "value": "${AZURE_HEALTH_RESOURCES_TOPIC_ID=}" }`) || !hookConstants(t, "hooks/preprovision.go")["AZURE_HEALTH_RESOURCES_TOPIC_ID"] {
		t.Error("healthResourcesTopicId is not filled from AZURE_HEALTH_RESOURCES_TOPIC_ID, which preprovision sets")
	}
	i := strings.Index(main.text, "module events ")
	if i < 0 {
		t.Fatal("no events module")
	}
	events := main.text[i : i+strings.Index(main.text[i:], "\n}\n")]
	for _, want := range []string{"scope: resourceGroup(healthTopicGroup)", "topicName: healthTopicName", "keptIdentityIds: reuseHealthTopic ? healthTopicNow.outputs.userAssignedIdentityIds"} {
		if !strings.Contains(events, want) {
			t.Errorf("the events module lacks %q", want)
		}
	}
	eg := load(t, "modules/eventgrid.bicep")
	for _, want := range []string{"name: topicName", "[eventGridIdentityId]), id => id, id => {})", "filter(keptIdentityIds", "name: 'karpfunc-${token}-"} {
		if !strings.Contains(eg.text, want) {
			t.Errorf("eventgrid.bicep lacks %q", want)
		}
	}
}

// TestRelayImageFromOwnRegistry (issue 18, item 4): azd up provisions the
// registry postdeploy pushes the relay image to, Entra ID only, and the
// kubelet identity may pull from it.
func TestRelayImageFromOwnRegistry(t *testing.T) {
	reg := load(t, "modules/registry.bicep")
	for _, want := range []string{"'Microsoft.ContainerRegistry/registries@", "adminUserEnabled: false", "anonymousPullEnabled: false",
		"roleDefinitions', acrPull)", "principalId: kubeletPrincipalId", "roleDefinitions', acrPush)", "principalId: deployerPrincipalId"} {
		if !strings.Contains(reg.text, want) {
			t.Errorf("registry.bicep lacks %q", want)
		}
	}
	main := load(t, "main.bicep")
	if !strings.Contains(main.text, "module registry 'modules/registry.bicep'") || !strings.Contains(main.text, "kubeletPrincipalId: aksKubeletIdentityObjectId") {
		t.Error("main.bicep does not deploy the registry with the kubelet identity")
	}
	if _, ok := main.outputs["AZURE_CONTAINER_REGISTRY_ENDPOINT"]; !ok || !hookConstants(t, "hooks/postdeploy.go")["AZURE_CONTAINER_REGISTRY_ENDPOINT"] {
		t.Error("the registry's login server is not an output postdeploy reads")
	}
	if !hookConstants(t, "hooks/preprovision.go")["AZURE_AKS_KUBELET_IDENTITY_OBJECT_ID"] {
		t.Error("preprovision does not record the kubelet identity's object ID")
	}
}

// serviceBusRoleClaims are the Service Bus claims each data role of
// servicebus.bicep gives (Learn, "Azure built-in roles for Azure Service
// Bus": Data Sender sends, Data Receiver receives, Data Owner has full
// data access, Manage included), by Bicep variable.
var serviceBusRoleClaims = map[string][]bus.Claim{
	"dataSender":   {bus.ClaimSend},
	"dataReceiver": {bus.ClaimListen},
	"dataOwner":    {bus.ClaimListen, bus.ClaimManage, bus.ClaimSend},
}

// serviceBusPrincipals maps servicebus.bicep's principal parameters to the
// identities of bus.QueueRights.
var serviceBusPrincipals = map[string]bus.Identity{
	"functionsPrincipalId": bus.IdentityFunctions,
	"relayPrincipalId":     bus.IdentityRelay,
	"eventGridPrincipalId": bus.IdentityEventGrid,
}

type identityQueue struct {
	identity bus.Identity
	queue    string
}

// bicepQueueGrants reads servicebus.bicep's grants: the roles each identity
// holds on each queue.
func bicepQueueGrants(t *testing.T) map[identityQueue][]string {
	t.Helper()
	sb := load(t, "modules/servicebus.bicep")
	grantRE := regexp.MustCompile(`(?m)^\s*\{ queue: (\w+), principalId: (\w+), role: (\w+) \}$`)
	out := map[identityQueue][]string{}
	for _, m := range grantRE.FindAllStringSubmatch(sb.text, -1) {
		id, ok := serviceBusPrincipals[m[2]]
		if !ok {
			t.Errorf("servicebus.bicep grants %s to %s, a principal bus.QueueRights does not know", m[3], m[2])
			continue
		}
		if _, ok := serviceBusRoleClaims[m[3]]; !ok {
			t.Errorf("servicebus.bicep grants %s, a role this test does not know", m[3])
			continue
		}
		key := identityQueue{id, m[1]}
		out[key] = append(out[key], m[3])
	}
	if len(out) == 0 {
		t.Fatal("servicebus.bicep has no grants in the form { queue: q, principalId: p, role: r }")
	}
	return out
}

// TestQueueGrants: servicebus.bicep's role assignments give each identity
// the claims bus.QueueRights lists on each queue, on no other queue, and no
// role that the others already cover.
func TestQueueGrants(t *testing.T) {
	granted := bicepQueueGrants(t)
	want := map[identityQueue][]bus.Claim{}
	for _, g := range bus.QueueRights {
		want[identityQueue{g.Identity, g.Queue}] = g.Claims
	}
	for key, claims := range want {
		roles := granted[key]
		for _, c := range claims {
			if !slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(serviceBusRoleClaims[r], c) }) {
				t.Errorf("%s needs %s on queue %s (bus.QueueRights); servicebus.bicep grants it %v", key.identity, c, key.queue, roles)
			}
		}
		for i, r := range roles {
			rest := slices.Delete(slices.Clone(roles), i, i+1)
			needed := slices.ContainsFunc(claims, func(c bus.Claim) bool {
				return slices.Contains(serviceBusRoleClaims[r], c) &&
					!slices.ContainsFunc(rest, func(o string) bool { return slices.Contains(serviceBusRoleClaims[o], c) })
			})
			if !needed {
				t.Errorf("servicebus.bicep grants %s %s on queue %s, which no claim of bus.QueueRights needs", key.identity, r, key.queue)
			}
		}
	}
	for key, roles := range granted {
		if _, ok := want[key]; !ok {
			t.Errorf("servicebus.bicep grants %s %v on queue %s; bus.QueueRights lists nothing there", key.identity, roles, key.queue)
		}
	}
}

// nodeNetworkActions are the actions the launcher needs in the node resource
// group to wire a NIC into the cluster's network (pkg/azure/nodenetwork.go),
// each with the action of Virtual Machine Contributor that grants it, as
// Learn's "Azure built-in roles for Compute" lists the role.
var nodeNetworkActions = map[string]string{
	"Microsoft.Network/loadBalancers/read":                            "Microsoft.Network/loadBalancers/read",
	"Microsoft.Network/loadBalancers/backendAddressPools/join/action": "Microsoft.Network/loadBalancers/backendAddressPools/join/action",
	"Microsoft.Network/networkSecurityGroups/read":                    "Microsoft.Network/networkSecurityGroups/read",
	"Microsoft.Network/networkSecurityGroups/join/action":             "Microsoft.Network/networkSecurityGroups/join/action",
	"Microsoft.Network/networkInterfaces/write":                       "Microsoft.Network/networkInterfaces/*",
}

// TestNodeNetworkAccess: the node resource group, where AKS puts the load
// balancer "kubernetes" and the cluster NSG, is where the Functions identity
// holds Virtual Machine Contributor, and its comment names every action the
// node network needs.
func TestNodeNetworkAccess(t *testing.T) {
	main := load(t, "main.bicep")
	i := strings.Index(main.text, "module nodeAccess 'modules/node-access.bicep'")
	if i < 0 {
		t.Fatal("main.bicep has no nodeAccess module")
	}
	if !strings.Contains(main.text[i:i+len(block(t, main.text, i))+100], "scope: resourceGroup(aksNodeResourceGroupName)") {
		t.Error("nodeAccess is not scoped to the node resource group")
	}
	access := load(t, "modules/node-access.bicep")
	if !strings.Contains(access.text, "roleDefinitions', virtualMachineContributor)") ||
		!strings.Contains(access.text, "guid(resourceGroup().id, functionsPrincipalId, virtualMachineContributor)") {
		t.Error("node-access.bicep does not assign Virtual Machine Contributor on its resource group")
	}
	for action, grantedBy := range nodeNetworkActions {
		short := strings.TrimPrefix(grantedBy, "Microsoft.Network/")
		if !strings.Contains(access.text, short) {
			t.Errorf("node-access.bicep does not say that Virtual Machine Contributor grants %s (%s)", action, grantedBy)
		}
	}
}

// TestQuotaReadAtSubscription: the Functions identity may read the
// subscription's compute usages (Microsoft.Compute/locations/usages/read),
// which only a role at the subscription grants: Reader there, a built-in
// role with no write or action, assigned by a subscription-scope module.
func TestQuotaReadAtSubscription(t *testing.T) {
	quota := load(t, "modules/quota-access.bicep")
	for _, want := range []string{"targetScope = 'subscription'", "var reader = 'acdd72a7-3385-48ef-bd42-f606fba81ae7'",
		"roleDefinitions', reader)", "principalId: functionsPrincipalId", "name: guid(subscription().id, functionsPrincipalId, reader)"} {
		if !strings.Contains(quota.text, want) {
			t.Errorf("quota-access.bicep lacks %q", want)
		}
	}
	main := load(t, "main.bicep")
	i := strings.Index(main.text, "module quotaAccess 'modules/quota-access.bicep'")
	if i < 0 {
		t.Fatal("main.bicep does not deploy modules/quota-access.bicep")
	}
	module := main.text[i : i+strings.Index(main.text[i:], "\n}\n")]
	if strings.Contains(module, "scope:") || !strings.Contains(module, "functionsPrincipalId: identities.outputs.functionsPrincipalId") {
		t.Errorf("the quota access module is not at the deployment's subscription for the Functions identity:\n%s", module)
	}
}
