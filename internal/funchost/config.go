package funchost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// HostConfig is the part of host.json the local host reads.
type HostConfig struct {
	Version         string `json:"version"`
	FunctionTimeout string `json:"functionTimeout"`
	CustomHandler   *struct {
		Description struct {
			DefaultExecutablePath string   `json:"defaultExecutablePath"`
			WorkingDirectory      string   `json:"workingDirectory"`
			Arguments             []string `json:"arguments"`
		} `json:"description"`
		EnableForwardingHttpRequest bool `json:"enableForwardingHttpRequest"`
	} `json:"customHandler"`
	Extensions struct {
		ServiceBus struct {
			AutoCompleteMessages       *bool  `json:"autoCompleteMessages"`
			MaxConcurrentCalls         int    `json:"maxConcurrentCalls"`
			MaxConcurrentSessions      int    `json:"maxConcurrentSessions"`
			MaxAutoLockRenewalDuration string `json:"maxAutoLockRenewalDuration"`
		} `json:"serviceBus"`
	} `json:"extensions"`
}

// FunctionTimeoutSetting is the app setting that overrides host.json's
// functionTimeout, as Azure's AzureFunctionsJobHost__<path> settings do.
const FunctionTimeoutSetting = "AzureFunctionsJobHost__functionTimeout"

// hostSettings is host.json resolved to what the host acts on.
type hostSettings struct {
	executable            string // as written (or overridden), unresolved
	workingDirectory      string // absolute
	arguments             []string
	functionTimeout       time.Duration // 0: none
	maxConcurrentCalls    int
	maxConcurrentSessions int
	maxAutoLockRenewal    time.Duration
}

// Host defaults, as the Functions host and the Service Bus extension have them.
const (
	defaultMaxConcurrentCalls    = 16
	defaultMaxConcurrentSessions = 8
	defaultMaxAutoLockRenewal    = 5 * time.Minute
	// Flex Consumption's default functionTimeout.
	defaultFunctionTimeout = 30 * time.Minute
)

func loadHostJSON(appRoot string, lookup func(string) (string, bool)) (hostSettings, error) {
	path := filepath.Join(appRoot, "host.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return hostSettings{}, fmt.Errorf("reading host.json: %w", err)
	}
	var hc HostConfig
	if err := json.Unmarshal(raw, &hc); err != nil {
		return hostSettings{}, fmt.Errorf("%s: %w", path, err)
	}
	fail := func(format string, args ...any) (hostSettings, error) {
		return hostSettings{}, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	}
	if hc.Version != "2.0" {
		return fail(`version is %q; the Functions runtime reads only "2.0"`, hc.Version)
	}
	if hc.CustomHandler == nil {
		return fail("no customHandler section; this host runs custom handlers only")
	}
	sb := hc.Extensions.ServiceBus
	if sb.AutoCompleteMessages != nil && !*sb.AutoCompleteMessages {
		return fail("extensions.serviceBus.autoCompleteMessages is false; a custom handler cannot settle messages, so they would never complete")
	}
	s := hostSettings{
		executable:            hc.CustomHandler.Description.DefaultExecutablePath,
		arguments:             hc.CustomHandler.Description.Arguments,
		maxConcurrentCalls:    defaultMaxConcurrentCalls,
		maxConcurrentSessions: defaultMaxConcurrentSessions,
		maxAutoLockRenewal:    defaultMaxAutoLockRenewal,
		functionTimeout:       defaultFunctionTimeout,
	}
	s.workingDirectory = appRoot
	if wd := hc.CustomHandler.Description.WorkingDirectory; wd != "" {
		if filepath.IsAbs(wd) {
			s.workingDirectory = wd
		} else {
			s.workingDirectory = filepath.Join(appRoot, wd)
		}
	}
	for i, arg := range s.arguments {
		if s.arguments[i], err = expandSettings(arg, lookup); err != nil {
			return fail("customHandler.description.arguments[%d]: %v", i, err)
		}
	}
	switch {
	case sb.MaxConcurrentCalls < 0:
		return fail("extensions.serviceBus.maxConcurrentCalls is %d; want > 0", sb.MaxConcurrentCalls)
	case sb.MaxConcurrentCalls > 0:
		s.maxConcurrentCalls = sb.MaxConcurrentCalls
	}
	switch {
	case sb.MaxConcurrentSessions < 0:
		return fail("extensions.serviceBus.maxConcurrentSessions is %d; want > 0", sb.MaxConcurrentSessions)
	case sb.MaxConcurrentSessions > 0:
		s.maxConcurrentSessions = sb.MaxConcurrentSessions
	}
	if v := sb.MaxAutoLockRenewalDuration; v != "" {
		if s.maxAutoLockRenewal, err = parseTimeSpan(v); err != nil {
			return fail("extensions.serviceBus.maxAutoLockRenewalDuration: %v", err)
		}
	}
	timeout, where := hc.FunctionTimeout, "functionTimeout"
	if v, ok := lookup(FunctionTimeoutSetting); ok && v != "" {
		// App settings override host.json, as in Azure.
		timeout, where = v, "app setting "+FunctionTimeoutSetting
	}
	switch v := timeout; v {
	case "":
	case "-1":
		s.functionTimeout = 0
	default:
		if s.functionTimeout, err = parseTimeSpan(v); err != nil {
			return fail("%s: %v", where, err)
		}
	}
	return s, nil
}

var timeSpanRE = regexp.MustCompile(`^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d{1,7})?$`)

// parseTimeSpan reads a .NET TimeSpan ("[d.]hh:mm:ss[.fffffff]").
func parseTimeSpan(s string) (time.Duration, error) {
	m := timeSpanRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a TimeSpan ([d.]hh:mm:ss[.fffffff])", s)
	}
	num := func(v string) time.Duration { n, _ := strconv.Atoi(v); return time.Duration(n) }
	d := num(m[1])*24*time.Hour + num(m[2])*time.Hour + num(m[3])*time.Minute + num(m[4])*time.Second
	if m[5] != "" {
		f, _ := strconv.ParseFloat("0"+m[5], 64)
		d += time.Duration(f * float64(time.Second))
	}
	return d, nil
}

var settingRE = regexp.MustCompile(`%([^%]*)%`)

// expandSettings replaces each %NAME% in s with the app setting NAME.
func expandSettings(s string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	out := settingRE.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		if name == "" {
			missing = append(missing, `"" (an empty "%%")`)
			return m
		}
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q refers to app setting %s, which is not set (in Options.Settings or the environment)", s, strings.Join(missing, ", "))
	}
	return out, nil
}

// Function is one function folder: its name and trigger.
type Function struct {
	Name string
	// File is the function.json path.
	File string
	// Binding is the trigger binding's name, the key of Data in requests.
	Binding string
	// ServiceBus is set for serviceBusTrigger functions.
	ServiceBus *ServiceBusTrigger
	// Timer is set for timerTrigger functions.
	Timer *TimerTrigger
}

// ServiceBusTrigger is a serviceBusTrigger binding.
type ServiceBusTrigger struct {
	Queue    string
	Sessions bool
}

// TimerTrigger is a timerTrigger binding.
type TimerTrigger struct {
	Expression   string
	Schedule     cron.Schedule
	RunOnStartup bool
}

var functionNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,127}$`)

// ncrontab is the six-field NCRONTAB parser: seconds first, as the Functions
// timer trigger reads it.
var ncrontab = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// loadFunctions reads every <dir>/<Name>/function.json. Folders without one
// are skipped: the functions directory also holds the handler's Go code.
func loadFunctions(dir string, lookup func(string) (string, bool)) ([]*Function, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the functions directory: %w", err)
	}
	var fns []*Function
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		file := filepath.Join(dir, e.Name(), "function.json")
		raw, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fn, err := parseFunction(e.Name(), file, raw, lookup)
		if err != nil {
			return nil, err
		}
		if fn != nil {
			fns = append(fns, fn)
		}
	}
	if len(fns) == 0 {
		return nil, fmt.Errorf("no function found: no %s", filepath.Join(dir, "<Name>", "function.json"))
	}
	return fns, nil
}

func parseFunction(name, file string, raw []byte, lookup func(string) (string, bool)) (*Function, error) {
	fail := func(format string, args ...any) (*Function, error) {
		return nil, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, args...))
	}
	if !functionNameRE.MatchString(name) {
		return fail("function name %q is invalid: want a letter followed by letters, digits, '_' or '-'", name)
	}
	var doc struct {
		Disabled bool              `json:"disabled"`
		Bindings []json.RawMessage `json:"bindings"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fail("%v", err)
	}
	if doc.Disabled {
		return nil, nil
	}
	if len(doc.Bindings) == 0 {
		return fail("no bindings; a function needs exactly one trigger")
	}
	fn := &Function{Name: name, File: file}
	for i, braw := range doc.Bindings {
		var b struct {
			Type              string `json:"type"`
			Name              string `json:"name"`
			Direction         string `json:"direction"`
			QueueName         string `json:"queueName"`
			TopicName         string `json:"topicName"`
			IsSessionsEnabled bool   `json:"isSessionsEnabled"`
			Schedule          string `json:"schedule"`
			RunOnStartup      bool   `json:"runOnStartup"`
		}
		dec := json.NewDecoder(bytes.NewReader(braw))
		if err := dec.Decode(&b); err != nil {
			return fail("bindings[%d]: %v", i, err)
		}
		where := fmt.Sprintf("bindings[%d] (%s %q)", i, b.Type, b.Name)
		switch b.Type {
		case "serviceBusTrigger", "timerTrigger":
		case "":
			return fail("bindings[%d] has no type", i)
		default:
			return fail("%s: binding type %q is not supported by the local host (supported: serviceBusTrigger, timerTrigger)", where, b.Type)
		}
		if fn.Binding != "" {
			return fail("%s: a second trigger; a function has exactly one", where)
		}
		if b.Name == "" {
			return fail("%s: no name; the name is the key of the request's Data", where)
		}
		if b.Direction != "" && b.Direction != "in" {
			return fail("%s: direction is %q; a trigger's direction is \"in\"", where, b.Direction)
		}
		fn.Binding = b.Name
		switch b.Type {
		case "serviceBusTrigger":
			if b.TopicName != "" {
				return fail("%s: topic subscriptions are not supported by the local host; use queueName", where)
			}
			if b.QueueName == "" {
				return fail("%s: no queueName", where)
			}
			q, err := expandSettings(b.QueueName, lookup)
			if err != nil {
				return fail("%s: queueName: %v", where, err)
			}
			if q == "" {
				return fail("%s: queueName %q expands to an empty name", where, b.QueueName)
			}
			fn.ServiceBus = &ServiceBusTrigger{Queue: q, Sessions: b.IsSessionsEnabled}
		case "timerTrigger":
			expr, err := expandSettings(b.Schedule, lookup)
			if err != nil {
				return fail("%s: schedule: %v", where, err)
			}
			if n := len(strings.Fields(expr)); n != 6 {
				return fail("%s: schedule %q has %d fields; want six-field NCRONTAB (seconds first), e.g. \"0 */5 * * * *\"", where, expr, n)
			}
			sched, err := ncrontab.Parse(expr)
			if err != nil {
				return fail("%s: schedule %q: %v", where, expr, err)
			}
			fn.Timer = &TimerTrigger{Expression: expr, Schedule: sched, RunOnStartup: b.RunOnStartup}
		}
	}
	if fn.Binding == "" {
		return fail("no trigger binding; a function needs exactly one")
	}
	return fn, nil
}

// sortFunctions orders functions by name, for stable logs.
func sortFunctions(fns []*Function) {
	slices.SortFunc(fns, func(a, b *Function) int { return strings.Compare(a.Name, b.Name) })
}
