// Package funchost is a local Azure Functions host for development and tests,
// where Functions Core Tools and Azure are not available. It reads the same
// host.json and function.json files, starts the same custom handler binary
// the same way, and delivers Service Bus and timer triggers with the same
// request envelope, retries and dead-lettering
// (shared/contracts/functions-custom-handler.md). Its Service Bus is
// localbus, reachable in process (Publish) and over loopback HTTP (BusURL).
package funchost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/karpfunc/karpfunc/internal/localbus"
	"github.com/karpfunc/karpfunc/internal/logwriter"
	"github.com/karpfunc/karpfunc/pkg/bus"
)

// EnvBusURL is set in the handler's environment to the local bus's base
// URL, so a function can publish (scheduled messages to itself, for one)
// through the bus's HTTP API.
const EnvBusURL = "KARPFUNC_LOCAL_BUS_URL"

// ExecutableSetting is the app setting that overrides host.json's
// customHandler.description.defaultExecutablePath, as in Azure.
const ExecutableSetting = "AzureFunctionsJobHost__customHandler__description__defaultExecutablePath"

// maxDescription bounds a failure's text in the host's log; the tail is
// kept because it holds the reason.
const maxDescription = 4096

// Options configures a Host.
type Options struct {
	// AppRoot holds host.json (required).
	AppRoot string
	// FunctionsDir holds the <Name>/function.json folders (default AppRoot;
	// relative to AppRoot).
	FunctionsDir string
	// Executable overrides host.json's defaultExecutablePath (and the
	// ExecutableSetting app setting). Relative paths are relative to the
	// working directory.
	Executable string
	// Env is the handler's base environment (nil: this process's).
	Env []string
	// Settings are app settings: they expand %NAME% in function.json and
	// host.json arguments (before the environment) and are added to the
	// handler's environment, as Azure does.
	Settings map[string]string
	// MaxDeliveryCount is the queues' maxDeliveryCount (default 10).
	MaxDeliveryCount int
	// RetryDelay is the pause before an abandoned message is redelivered
	// (default 1 s).
	RetryDelay time.Duration
	// LockDuration is the queues' lock duration (default 1 min); the host
	// renews it up to host.json's maxAutoLockRenewalDuration.
	LockDuration time.Duration
	// DuplicateDetectionWindow (default 10 min).
	DuplicateDetectionWindow time.Duration
	// BusAddr is the loopback address of the bus's HTTP API (default
	// 127.0.0.1:0, a free port).
	BusAddr string
	// StartupTimeout bounds the handler's readiness (default 60 s).
	StartupTimeout time.Duration
	// StopTimeout is how long Stop lets the handler finish after SIGTERM
	// before killing it (default 30 s).
	StopTimeout time.Duration
	// Log receives the host's log and the handler's stdout and stderr
	// (default os.Stderr).
	Log io.Writer
	// Clock drives timers, scheduled messages and retries (default real).
	Clock clock.Clock
	// Rights are the namespace's role assignments (bus.QueueRights), by
	// logical queue name; the app settings (PROVISION_QUEUE, …) map them to
	// entities, and queues they do not map keep their names. The host
	// receives as bus.IdentityFunctions and gives the handler that
	// identity's credential (bus.EnvLocalBusCredential); other processes
	// present theirs (Host.Bus().Credential). Nil turns authorization off,
	// which the host logs.
	Rights []bus.Grant
}

// FunctionStats counts one function's invocations.
type FunctionStats struct {
	Invocations int64 `json:"invocations"`
	Succeeded   int64 `json:"succeeded"`
	Failed      int64 `json:"failed"`
}

// Host is a running local Functions host.
type Host struct {
	opts      Options
	settings  hostSettings
	functions []*Function
	bus       *localbus.Bus
	identity  *localbus.Client // the Function App's identity
	busServer *http.Server
	busURL    string
	proc      *supervisor
	log       *log.Logger
	client    *http.Client

	// receiveCtx stops the trigger loops; invokeCtx, cancelled last,
	// bounds invocations already started.
	cancelReceive, cancelInvoke context.CancelFunc
	invokeCtx                   context.Context
	loops                       sync.WaitGroup
	stopOnce                    sync.Once

	mu           sync.Mutex
	stats        map[string]*FunctionStats
	timersActive int
}

// Start reads the app, starts the bus and the handler, and begins delivering.
func Start(ctx context.Context, opts Options) (*Host, error) {
	opts, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	out := logwriter.NewSynced(opts.Log)
	host := &Host{opts: opts, log: log.New(out, "funchost: ", log.Ltime|log.Lmicroseconds), stats: map[string]*FunctionStats{}}
	lookup := host.lookupSetting

	if host.settings, err = loadHostJSON(opts.AppRoot, lookup); err != nil {
		return nil, err
	}
	if host.functions, err = loadFunctions(opts.FunctionsDir, lookup); err != nil {
		return nil, err
	}
	sortFunctions(host.functions)
	executable, err := host.resolveExecutable()
	if err != nil {
		return nil, err
	}
	if err := host.startBus(); err != nil {
		return nil, err
	}
	host.proc = &supervisor{path: executable, args: host.settings.arguments, dir: host.settings.workingDirectory,
		env: host.handlerEnv(), output: logwriter.NewLines(out, "handler: ", 0), log: host.log,
		startupTimeout: opts.StartupTimeout, stopTimeout: opts.StopTimeout}
	if err := host.proc.start(ctx); err != nil {
		_ = host.busServer.Close()
		return nil, err
	}
	// One transport for all invocations; no client timeout, functionTimeout
	// bounds each invocation through its context.
	host.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	host.startLoops(ctx)
	host.checkScaleRights()
	host.log.Printf("bus API on %s", host.busURL)
	return host, nil
}

// withDefaults checks opts, makes its directories absolute and fills the
// options left zero.
func withDefaults(opts Options) (Options, error) {
	if opts.AppRoot == "" {
		return opts, errors.New("funchost: Options.AppRoot is required")
	}
	appRoot, err := filepath.Abs(opts.AppRoot)
	if err != nil {
		return opts, err
	}
	opts.AppRoot = appRoot
	switch {
	case opts.FunctionsDir == "":
		opts.FunctionsDir = appRoot
	case !filepath.IsAbs(opts.FunctionsDir):
		opts.FunctionsDir = filepath.Join(appRoot, opts.FunctionsDir)
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.StartupTimeout <= 0 {
		opts.StartupTimeout = 60 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 30 * time.Second
	}
	if opts.BusAddr == "" {
		opts.BusAddr = "127.0.0.1:0"
	}
	return opts, nil
}

// startBus creates the local bus with the functions' queues and serves its
// API on Options.BusAddr.
func (h *Host) startBus() error {
	rights, err := h.entityRights()
	if err != nil {
		return err
	}
	opts := h.opts
	h.bus = localbus.New(localbus.Options{Clock: opts.Clock, MaxDeliveryCount: opts.MaxDeliveryCount,
		RetryDelay: opts.RetryDelay, LockDuration: opts.LockDuration, MaxAutoLockRenewal: h.settings.maxAutoLockRenewal,
		DuplicateDetectionWindow: opts.DuplicateDetectionWindow, Rights: rights})
	h.identity = h.bus.As(bus.IdentityFunctions)
	for _, fn := range h.functions {
		h.stats[fn.Name] = &FunctionStats{}
		if fn.ServiceBus == nil {
			continue
		}
		// Duplicate detection on, as karpfunc's deployment creates its
		// queues (publishers rely on it for idempotence).
		if err := h.bus.CreateQueue(fn.ServiceBus.Queue, localbus.QueueOptions{RequiresSession: fn.ServiceBus.Sessions, RequiresDuplicateDetection: true}); err != nil {
			return fmt.Errorf("%s: %w", fn.File, err)
		}
	}
	listener, err := net.Listen("tcp", opts.BusAddr)
	if err != nil {
		return fmt.Errorf("listening for the bus API on %s: %w", opts.BusAddr, err)
	}
	h.busURL = "http://" + listener.Addr().String()
	h.busServer = &http.Server{Handler: h.bus.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.busServer.Serve(listener) }()
	return nil
}

// startLoops starts each function's trigger: receive loops for a Service
// Bus trigger, as many as its concurrency, and a timer loop for a timer.
func (h *Host) startLoops(ctx context.Context) {
	var receiveCtx context.Context
	receiveCtx, h.cancelReceive = context.WithCancel(context.WithoutCancel(ctx))
	h.invokeCtx, h.cancelInvoke = context.WithCancel(context.WithoutCancel(ctx))
	for _, fn := range h.functions {
		switch {
		case fn.ServiceBus != nil:
			concurrency := h.settings.maxConcurrentCalls
			if fn.ServiceBus.Sessions {
				// One call per session (maxConcurrentCallsPerSession 1).
				concurrency = h.settings.maxConcurrentSessions
			}
			for range concurrency {
				h.loops.Go(func() { h.receiveLoop(receiveCtx, fn) })
			}
			h.log.Printf("function %s: serviceBusTrigger on queue %q (sessions %t, concurrency %d)", fn.Name, fn.ServiceBus.Queue, fn.ServiceBus.Sessions, concurrency)
		case fn.Timer != nil:
			h.loops.Go(func() { h.timerLoop(receiveCtx, fn) })
			h.log.Printf("function %s: timerTrigger %q (runOnStartup %t)", fn.Name, fn.Timer.Expression, fn.Timer.RunOnStartup)
		}
	}
}

// entityRights maps Options.Rights' logical queues to the entities the app
// settings name.
func (h *Host) entityRights() ([]bus.Grant, error) {
	if h.opts.Rights == nil {
		h.log.Printf("no rights table: every identity may send to and receive from every queue (as with a namespace key holding every claim)")
		return nil, nil
	}
	names, err := bus.QueueNamesFromEnv(func(k string) string { value, _ := h.lookupSetting(k); return value })
	if err != nil {
		return nil, fmt.Errorf("funchost: %w", err)
	}
	return bus.Named(h.opts.Rights, names), nil
}

// checkScaleRights reads each trigger queue's runtime properties as the
// Service Bus extension's scale monitor does, and warns as it does when the
// identity lacks Manage (Azure/azure-sdk-for-net
// sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus/src/Listeners/ServiceBusMetricsProvider.cs):
// the app then scales on the first message's age, not the queue length.
func (h *Host) checkScaleRights() {
	for _, fn := range h.functions {
		if fn.ServiceBus == nil {
			continue
		}
		if _, err := h.identity.RuntimeProperties(fn.ServiceBus.Queue); bus.IsUnauthorized(err) {
			h.log.Printf("warning: Connection string does not have Manage claim for queue '%s'. Failed to get queue description to derive queue length metrics. Falling back to using first message enqueued time. (%v)",
				fn.ServiceBus.Queue, err)
		}
	}
}

func (h *Host) lookupSetting(name string) (string, bool) {
	if value, ok := h.opts.Settings[name]; ok {
		return value, true
	}
	return os.LookupEnv(name)
}

// resolveExecutable applies the overrides and resolves the path: relative to
// the working directory if a file is there, else on PATH, as the host does
// for "python" and the like.
func (h *Host) resolveExecutable() (string, error) {
	exe := h.settings.executable
	if configured, ok := h.lookupSetting(ExecutableSetting); ok && configured != "" {
		exe = configured
	}
	if h.opts.Executable != "" {
		exe = h.opts.Executable
	}
	if exe == "" {
		return "", errors.New("funchost: no handler executable: host.json customHandler.description.defaultExecutablePath is empty and Options.Executable is not set")
	}
	if filepath.IsAbs(exe) {
		return exe, nil
	}
	candidate := filepath.Join(h.settings.workingDirectory, exe)
	if st, err := os.Stat(candidate); err == nil && !st.IsDir() {
		return candidate, nil
	}
	if !strings.ContainsRune(exe, filepath.Separator) {
		if path, err := exec.LookPath(exe); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("funchost: handler executable %q not found in %s or on PATH", exe, h.settings.workingDirectory)
}

func (h *Host) handlerEnv() []string {
	env := h.opts.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.Clone(env)
	for _, name := range slices.Sorted(maps.Keys(h.opts.Settings)) {
		env = append(env, name+"="+h.opts.Settings[name])
	}
	return append(env, EnvBusURL+"="+h.busURL, bus.EnvLocalBusCredential+"="+h.bus.Credential(bus.IdentityFunctions))
}

// receiveLoop is one concurrent call slot of a serviceBusTrigger function.
func (h *Host) receiveLoop(ctx context.Context, fn *Function) {
	for {
		delivery, err := h.identity.Receive(ctx, fn.ServiceBus.Queue)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, localbus.ErrClosed) {
				return
			}
			h.log.Printf("The listener for function 'Functions.%s' was unable to start: receiving from %q: %v", fn.Name, fn.ServiceBus.Queue, err)
			sleepCtx(ctx, listenerRetry(err))
			continue
		}
		req, err := serviceBusRequest(fn, delivery, h.opts.Clock.Now())
		var failure string
		if err != nil {
			failure = fmt.Sprintf("encoding the request: %v", err)
		} else {
			failure = h.invoke(fn, req, fmt.Sprintf("New ServiceBus message detected on '%s' (MessageId=%s, DeliveryCount=%d)", delivery.Queue, delivery.Message.ID, delivery.DeliveryCount))
		}
		if failure == "" {
			err = h.identity.Complete(delivery)
		} else {
			err = h.identity.Abandon(delivery, failure)
		}
		if err != nil {
			// The lock ran out during the invocation: the message was
			// already released to another delivery, as in Service Bus.
			h.log.Printf("function %s: settling message %q: %v", fn.Name, delivery.Message.ID, err)
		}
	}
}

// listenerRetry is how long a trigger waits after its receive failed: a
// missing claim does not fix itself, so it waits longer and logs less.
func listenerRetry(err error) time.Duration {
	if bus.IsUnauthorized(err) {
		return 10 * time.Second
	}
	return time.Second
}

func sleepCtx(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// timerLoop fires a timer function at each occurrence of its schedule. Runs
// of one timer never overlap, as the host's singleton lock ensures.
func (h *Host) timerLoop(ctx context.Context, fn *Function) {
	var status *timerStatus
	fire := func(scheduled time.Time, reason string) {
		now := h.opts.Clock.Now()
		// The host reports a run as past due when it starts late.
		pastDue := !scheduled.IsZero() && now.Sub(scheduled) > time.Second
		req, err := timerRequest(fn, status, pastDue, now)
		if err != nil {
			h.log.Printf("function %s: encoding the request: %v", fn.Name, err)
			return
		}
		h.mu.Lock()
		h.timersActive++
		h.mu.Unlock()
		h.invoke(fn, req, reason)
		h.mu.Lock()
		h.timersActive--
		h.mu.Unlock()
		done := h.opts.Clock.Now()
		status = &timerStatus{last: now, next: fn.Timer.Schedule.Next(done), lastUpdated: done}
	}
	if fn.Timer.RunOnStartup {
		fire(time.Time{}, "Timer fired at startup (runOnStartup)")
	}
	for {
		next := fn.Timer.Schedule.Next(h.opts.Clock.Now())
		timer := h.opts.Clock.NewTimer(max(next.Sub(h.opts.Clock.Now()), 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		fire(next, fmt.Sprintf("Timer fired at %s", next.UTC().Format(time.RFC3339)))
	}
}

// invoke posts one request to the handler and returns "" on success or the
// failure as the host reports it (see outcome), or the transport error.
func (h *Host) invoke(fn *Function, body []byte, reason string) (failure string) {
	id := localbus.NewGUID()
	start := time.Now()
	h.log.Printf("Executing 'Functions.%s' (Reason='%s', Id=%s)", fn.Name, reason, id)
	defer func() {
		h.mu.Lock()
		stats := h.stats[fn.Name]
		stats.Invocations++
		if failure == "" {
			stats.Succeeded++
		} else {
			stats.Failed++
		}
		h.mu.Unlock()
		if failure == "" {
			h.log.Printf("Executed 'Functions.%s' (Succeeded, Id=%s, Duration=%s)", fn.Name, id, time.Since(start).Round(time.Millisecond))
		} else {
			h.log.Printf("Executed 'Functions.%s' (Failed, Id=%s, Duration=%s): %s", fn.Name, id, time.Since(start).Round(time.Millisecond),
				strings.ReplaceAll(failure, "\n", " | "))
		}
	}()
	ctx := h.invokeCtx
	if h.settings.functionTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.settings.functionTimeout)
		defer cancel()
	}
	base, err := h.proc.endpoint(ctx)
	if err != nil {
		return fmt.Sprintf("no handler to invoke: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/"+fn.Name, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Azure-Functions-InvocationId", id)
	req.Header.Set("X-Azure-Functions-HostVersion", HostVersion)
	req.Header.Set("User-Agent", "Azure-Functions-Host/"+HostVersion)
	resp, err := h.client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Sprintf("Timeout value of %s exceeded by function 'Functions.%s' (Id: '%s')", h.settings.functionTimeout, fn.Name, id)
		}
		return fmt.Sprintf("POST /%s failed: %v", fn.Name, err)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Sprintf("POST /%s: reading the response (%s): %v", fn.Name, resp.Status, err)
	}
	return h.outcome(fn, id, resp, respBody)
}

// outcome is what the host makes of the handler's answer, as the real host
// does (Azure/azure-functions-host
// src/WebJobs.Script/Workers/Http/DefaultHttpWorkerService.cs,
// ProcessDefaultInvocationRequest): the status is checked first
// (EnsureSuccessStatusCode), so a non-2xx answer fails the invocation with
// .NET's HttpRequestException text and its body, Logs included, is never
// read. Only a 2xx answer's Logs reach the function's log (category
// Function.<Name>.User). The handler's reasons for a failure therefore
// reach Application Insights only through its stdout and stderr
// (Host.Function.Console, WorkerConsoleLogService.cs), which the host
// forwards line by line whatever the answer.
func (h *Host) outcome(fn *Function, invocationID string, resp *http.Response, body []byte) (failure string) {
	if resp.StatusCode/100 != 2 {
		return fmt.Sprintf("Response status code does not indicate success: %d (%s).", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	var reply struct{ Logs []string }
	if err := json.Unmarshal(body, &reply); err != nil {
		return truncateTail(fmt.Sprintf("Invalid HttpResponseMessage: POST /%s answered %s with a body that is not JSON: %s", fn.Name, resp.Status, body))
	}
	for _, line := range reply.Logs {
		h.log.Printf("Function.%s.User (Id=%s): %s", fn.Name, invocationID, line)
	}
	return ""
}

func truncateTail(s string) string {
	if len(s) <= maxDescription {
		return s
	}
	head := s[:min(strings.IndexByte(s, ':')+1, 200)]
	// Cutting may split a rune; drop the pieces rather than send bad UTF-8.
	return head + " …" + strings.ToValidUTF8(s[len(s)-(maxDescription-len(head)-4):], "")
}

// BusURL is the base URL of the bus's HTTP API.
func (h *Host) BusURL() string { return h.busURL }

// Bus is the host's in-process bus.
func (h *Host) Bus() *localbus.Bus { return h.bus }

// Functions returns the functions the host found.
func (h *Host) Functions() []Function {
	out := make([]Function, len(h.functions))
	for i, fn := range h.functions {
		out[i] = *fn
	}
	return out
}

// Publish sends msgs to queue as the namespace's owner (no identity's
// rights apply: a person with Data Owner, sending from the portal); Host is
// a bus.Publisher. Components publish as their identity:
// Bus().As(identity), or over HTTP with Bus().Credential(identity).
func (h *Host) Publish(ctx context.Context, queue string, msgs ...bus.Message) error {
	return h.bus.Publish(ctx, queue, msgs...)
}

// Close is a no-op: a Host lent out as a bus.Publisher is stopped by its
// owner with Stop, not by the component it was lent to.
func (h *Host) Close(context.Context) error { return nil }

var _ bus.Publisher = (*Host)(nil)

// DeadLetters returns queue's dead-lettered messages.
func (h *Host) DeadLetters(queue string) ([]localbus.DeadLetter, error) {
	return h.bus.DeadLetters(queue)
}

// Stats returns each queue's counters.
func (h *Host) Stats() map[string]localbus.QueueStats { return h.bus.Stats() }

// FunctionStats returns each function's invocation counters.
func (h *Host) FunctionStats() map[string]FunctionStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]FunctionStats, len(h.stats))
	for name, stats := range h.stats {
		out[name] = *stats
	}
	return out
}

// Restarts is how many times the handler was restarted after exiting.
func (h *Host) Restarts() int { return h.proc.restartCount() }

// HandlerPID is the running handler's process id (0 while restarting).
func (h *Host) HandlerPID() int { return h.proc.pid() }

// WaitIdle waits until every queue is empty, nothing is in flight (timer
// runs included), and no message is scheduled before the time of the call.
// Messages scheduled later (a liveness check minutes away) do not count.
func (h *Host) WaitIdle(ctx context.Context) error {
	return h.WaitIdleUntil(ctx, h.opts.Clock.Now())
}

// WaitIdleUntil is WaitIdle counting messages scheduled before horizon.
func (h *Host) WaitIdleUntil(ctx context.Context, horizon time.Time) error {
	poll := time.NewTicker(10 * time.Millisecond) // timer runs have no change signal
	defer poll.Stop()
	for {
		changed := h.bus.Changed()
		h.mu.Lock()
		timers := h.timersActive
		h.mu.Unlock()
		if timers == 0 && h.bus.Idle(horizon) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the host to be idle: %w (queues: %s)", ctx.Err(), h.describeStats())
		case <-changed:
		case <-poll.C:
		}
	}
}

func (h *Host) describeStats() string {
	stats := h.Stats()
	var parts []string
	for _, queueName := range slices.Sorted(maps.Keys(stats)) {
		queueStats := stats[queueName]
		parts = append(parts, fmt.Sprintf("%s active=%d inFlight=%d scheduled=%d", queueName, queueStats.Active, queueStats.InFlight, queueStats.Scheduled))
	}
	return strings.Join(parts, ", ")
}

// Stop stops delivering, sends the handler SIGTERM and waits for it to
// finish in-flight invocations (StopTimeout), then closes the bus.
func (h *Host) Stop() {
	h.stopOnce.Do(func() {
		h.cancelReceive()
		h.proc.stop()
		h.cancelInvoke()
		h.loops.Wait()
		_ = h.bus.Close(context.Background())
		_ = h.busServer.Close()
		h.client.CloseIdleConnections()
		h.log.Printf("stopped (handler restarts: %d)", h.proc.restartCount())
	})
}
