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
		EnableForwardingHTTPRequest bool `json:"enableForwardingHttpRequest"`
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
	var config HostConfig
	if err := json.Unmarshal(raw, &config); err != nil {
		return hostSettings{}, fmt.Errorf("%s: %w", path, err)
	}
	settings, err := resolveHostConfig(&config, appRoot, lookup)
	if err != nil {
		return hostSettings{}, fmt.Errorf("%s: %w", path, err)
	}
	return settings, nil
}

// resolveHostConfig checks host.json and resolves it to what the host acts on.
func resolveHostConfig(config *HostConfig, appRoot string, lookup func(string) (string, bool)) (hostSettings, error) {
	if config.Version != "2.0" {
		return hostSettings{}, fmt.Errorf(`version is %q; the Functions runtime reads only "2.0"`, config.Version)
	}
	if config.CustomHandler == nil {
		return hostSettings{}, errors.New("no customHandler section; this host runs custom handlers only")
	}
	if auto := config.Extensions.ServiceBus.AutoCompleteMessages; auto != nil && !*auto {
		return hostSettings{}, errors.New("extensions.serviceBus.autoCompleteMessages is false; a custom handler cannot settle messages, so they would never complete")
	}
	description := config.CustomHandler.Description
	settings := hostSettings{
		executable:            description.DefaultExecutablePath,
		arguments:             description.Arguments,
		maxConcurrentCalls:    defaultMaxConcurrentCalls,
		maxConcurrentSessions: defaultMaxConcurrentSessions,
		maxAutoLockRenewal:    defaultMaxAutoLockRenewal,
	}
	settings.workingDirectory = appRoot
	if dir := description.WorkingDirectory; dir != "" {
		if filepath.IsAbs(dir) {
			settings.workingDirectory = dir
		} else {
			settings.workingDirectory = filepath.Join(appRoot, dir)
		}
	}
	for index, arg := range settings.arguments {
		var err error
		if settings.arguments[index], err = expandSettings(arg, lookup); err != nil {
			return hostSettings{}, fmt.Errorf("customHandler.description.arguments[%d]: %w", index, err)
		}
	}
	if err := settings.applyServiceBus(config); err != nil {
		return hostSettings{}, err
	}
	var err error
	if settings.functionTimeout, err = functionTimeout(config.FunctionTimeout, lookup); err != nil {
		return hostSettings{}, err
	}
	return settings, nil
}

// applyServiceBus applies extensions.serviceBus's concurrency and lock
// renewal settings; zero keeps the extension's default.
func (s *hostSettings) applyServiceBus(config *HostConfig) error {
	serviceBus := config.Extensions.ServiceBus
	switch {
	case serviceBus.MaxConcurrentCalls < 0:
		return fmt.Errorf("extensions.serviceBus.maxConcurrentCalls is %d; want > 0", serviceBus.MaxConcurrentCalls)
	case serviceBus.MaxConcurrentCalls > 0:
		s.maxConcurrentCalls = serviceBus.MaxConcurrentCalls
	}
	switch {
	case serviceBus.MaxConcurrentSessions < 0:
		return fmt.Errorf("extensions.serviceBus.maxConcurrentSessions is %d; want > 0", serviceBus.MaxConcurrentSessions)
	case serviceBus.MaxConcurrentSessions > 0:
		s.maxConcurrentSessions = serviceBus.MaxConcurrentSessions
	}
	if renewal := serviceBus.MaxAutoLockRenewalDuration; renewal != "" {
		var err error
		if s.maxAutoLockRenewal, err = parseTimeSpan(renewal); err != nil {
			return fmt.Errorf("extensions.serviceBus.maxAutoLockRenewalDuration: %w", err)
		}
	}
	return nil
}

// functionTimeout is host.json's functionTimeout, or the app setting that
// overrides it as in Azure: Flex Consumption's default when neither says,
// 0 (none) for "-1".
func functionTimeout(fromHostJSON string, lookup func(string) (string, bool)) (time.Duration, error) {
	timeout := fromHostJSON
	where := "functionTimeout"
	if setting, ok := lookup(FunctionTimeoutSetting); ok && setting != "" {
		timeout = setting
		where = "app setting " + FunctionTimeoutSetting
	}
	switch timeout {
	case "":
		return defaultFunctionTimeout, nil
	case "-1":
		return 0, nil
	}
	parsed, err := parseTimeSpan(timeout)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", where, err)
	}
	return parsed, nil
}

var timeSpanRE = regexp.MustCompile(`^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d{1,7})?$`)

// parseTimeSpan reads a .NET TimeSpan ("[d.]hh:mm:ss[.fffffff]").
func parseTimeSpan(s string) (time.Duration, error) {
	match := timeSpanRE.FindStringSubmatch(strings.TrimSpace(s))
	if match == nil {
		return 0, fmt.Errorf("%q is not a TimeSpan ([d.]hh:mm:ss[.fffffff])", s)
	}
	num := func(v string) time.Duration { parsed, _ := strconv.Atoi(v); return time.Duration(parsed) }
	span := num(match[1])*24*time.Hour + num(match[2])*time.Hour + num(match[3])*time.Minute + num(match[4])*time.Second
	if match[5] != "" {
		fraction, _ := strconv.ParseFloat("0"+match[5], 64)
		span += time.Duration(fraction * float64(time.Second))
	}
	return span, nil
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
		value, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return value
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
	for _, entry := range entries {
		if !entry.IsDir() {
			continue
		}
		file := filepath.Join(dir, entry.Name(), "function.json")
		raw, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fn, err := parseFunction(entry.Name(), file, raw, lookup)
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

// binding is one entry of function.json's bindings.
type binding struct {
	Type              string `json:"type"`
	Name              string `json:"name"`
	Direction         string `json:"direction"`
	QueueName         string `json:"queueName"`
	TopicName         string `json:"topicName"`
	IsSessionsEnabled bool   `json:"isSessionsEnabled"`
	Schedule          string `json:"schedule"`
	RunOnStartup      bool   `json:"runOnStartup"`
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
	for index, rawBinding := range doc.Bindings {
		var trigger binding
		if err := json.NewDecoder(bytes.NewReader(rawBinding)).Decode(&trigger); err != nil {
			return fail("bindings[%d]: %v", index, err)
		}
		if err := fn.addTrigger(index, trigger, lookup); err != nil {
			return fail("%s", err)
		}
	}
	if fn.Binding == "" {
		return fail("no trigger binding; a function needs exactly one")
	}
	return fn, nil
}

// addTrigger checks the binding at index and makes it fn's trigger.
func (fn *Function) addTrigger(index int, trigger binding, lookup func(string) (string, bool)) error {
	where := fmt.Sprintf("bindings[%d] (%s %q)", index, trigger.Type, trigger.Name)
	switch trigger.Type {
	case "serviceBusTrigger", "timerTrigger":
	case "":
		return fmt.Errorf("bindings[%d] has no type", index)
	default:
		return fmt.Errorf("%s: binding type %q is not supported by the local host (supported: serviceBusTrigger, timerTrigger)", where, trigger.Type)
	}
	if fn.Binding != "" {
		return fmt.Errorf("%s: a second trigger; a function has exactly one", where)
	}
	if trigger.Name == "" {
		return fmt.Errorf("%s: no name; the name is the key of the request's Data", where)
	}
	if trigger.Direction != "" && trigger.Direction != "in" {
		return fmt.Errorf("%s: direction is %q; a trigger's direction is \"in\"", where, trigger.Direction)
	}
	fn.Binding = trigger.Name
	var err error
	if trigger.Type == "serviceBusTrigger" {
		fn.ServiceBus, err = serviceBusTrigger(trigger, lookup)
	} else {
		fn.Timer, err = timerTrigger(trigger, lookup)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// serviceBusTrigger reads a serviceBusTrigger binding: a queue (no topics),
// its name expanded from app settings.
func serviceBusTrigger(trigger binding, lookup func(string) (string, bool)) (*ServiceBusTrigger, error) {
	if trigger.TopicName != "" {
		return nil, errors.New("topic subscriptions are not supported by the local host; use queueName")
	}
	if trigger.QueueName == "" {
		return nil, errors.New("no queueName")
	}
	queue, err := expandSettings(trigger.QueueName, lookup)
	if err != nil {
		return nil, fmt.Errorf("queueName: %w", err)
	}
	if queue == "" {
		return nil, fmt.Errorf("queueName %q expands to an empty name", trigger.QueueName)
	}
	return &ServiceBusTrigger{Queue: queue, Sessions: trigger.IsSessionsEnabled}, nil
}

// timerTrigger reads a timerTrigger binding: a six-field NCRONTAB schedule,
// expanded from app settings.
func timerTrigger(trigger binding, lookup func(string) (string, bool)) (*TimerTrigger, error) {
	expr, err := expandSettings(trigger.Schedule, lookup)
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	if fields := len(strings.Fields(expr)); fields != 6 {
		return nil, fmt.Errorf("schedule %q has %d fields; want six-field NCRONTAB (seconds first), e.g. \"0 */5 * * * *\"", expr, fields)
	}
	schedule, err := ncrontab.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", expr, err)
	}
	return &TimerTrigger{Expression: expr, Schedule: schedule, RunOnStartup: trigger.RunOnStartup}, nil
}

// sortFunctions orders functions by name, for stable logs.
func sortFunctions(fns []*Function) {
	slices.SortFunc(fns, func(a, b *Function) int { return strings.Compare(a.Name, b.Name) })
}
