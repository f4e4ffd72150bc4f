package funchost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/internal/localbus"
	"github.com/karpfunc/karpfunc/pkg/bus"
)

// echoHandler is the real handler binary every test runs, built once.
var echoHandler string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "funchost-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	echoHandler = filepath.Join(dir, "echohandler")
	build := exec.Command("go", "build", "-o", echoHandler, "../../functions/internal/customhandler/testdata/echohandler")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the echo handler:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testHostJSON = `{
  "version": "2.0",
  "functionTimeout": "00:00:20",
  "customHandler": {
    "description": { "defaultExecutablePath": "echohandler", "workingDirectory": "bin", "arguments": [] },
    "enableForwardingHttpRequest": false
  },
  "extensionBundle": { "id": "Microsoft.Azure.Functions.ExtensionBundle", "version": "[4.*, 5.0.0)" },
  "extensions": {
    "serviceBus": { "autoCompleteMessages": true, "maxConcurrentCalls": 4,
                    "maxConcurrentSessions": 4, "maxAutoLockRenewalDuration": "00:05:00" }
  }
}`

var testFunctions = map[string]string{
	"Echo":    `{"bindings":[{"name":"msg","type":"serviceBusTrigger","direction":"in","queueName":"%ECHO_QUEUE%","connection":"ServiceBusConnection"}]}`,
	"Ordered": `{"bindings":[{"name":"msg","type":"serviceBusTrigger","direction":"in","queueName":"ordered","connection":"ServiceBusConnection","isSessionsEnabled":true}]}`,
	"Raw":     `{"bindings":[{"name":"msg","type":"serviceBusTrigger","direction":"in","queueName":"raw","connection":"ServiceBusConnection"}]}`,
}

type app struct {
	root, record string
	log          *lockedBuffer
}

// newApp lays out an app root the way the repo does: host.json at the root,
// the handler in bin/, function folders under functions/ next to Go code.
func newApp(t *testing.T, hostJSON string, functions map[string]string) *app {
	t.Helper()
	root := t.TempDir()
	write := func(path, content string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "host.json"), hostJSON)
	for name, fj := range functions {
		write(filepath.Join(root, "functions", name, "function.json"), fj)
	}
	write(filepath.Join(root, "functions", "internal", "notafunction.go"), "package internal\n")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(echoHandler, filepath.Join(root, "bin", "echohandler")); err != nil {
		t.Fatal(err)
	}
	return &app{root: root, record: filepath.Join(root, "records.jsonl"), log: &lockedBuffer{}}
}

func (a *app) options() Options {
	return Options{
		AppRoot:      a.root,
		FunctionsDir: "functions",
		Env:          append(os.Environ(), "ECHO_RECORD="+a.record),
		Settings:     map[string]string{"ECHO_QUEUE": "echo", "ECHO_APP_SETTING": "from-settings"},
		RetryDelay:   20 * time.Millisecond,
		StopTimeout:  5 * time.Second,
		Log:          a.log,
	}
}

func (a *app) start(t *testing.T, opts Options) *Host {
	t.Helper()
	h, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, a.log)
	}
	t.Cleanup(func() {
		h.Stop()
		if t.Failed() {
			t.Logf("host log:\n%s", a.log)
		}
	})
	return h
}

type record struct {
	Function     string
	InvocationID string
	PID          int
	Headers      map[string]string
	Metadata     struct {
		DeliveryCount         int
		SequenceNumber        int64
		MessageID             string
		SessionID             string
		LockToken             string
		ContentType           string
		EnqueuedTimeUTC       time.Time
		ApplicationProperties map[string]any
		Sys                   struct {
			MethodName string
			UtcNow     time.Time
			RandGuid   string
		}
		Raw map[string]json.RawMessage
	}
	Body  string
	Timer *struct {
		Schedule       struct{ AdjustForDST bool }
		ScheduleStatus *struct{ Last, Next, LastUpdated time.Time }
		IsPastDue      bool
	}
	Start, End time.Time
	Env        map[string]string
}

func (a *app) records(t *testing.T) []record {
	t.Helper()
	f, err := os.Open(a.record)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %s: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func waitIdle(t *testing.T, h *Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func command(id, body string) bus.Message {
	return bus.Message{ID: id, ContentType: "application/json", Body: []byte(body)}
}

func TestServiceBusEnvelope(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	h := a.start(t, a.options())
	before := time.Now().Add(-time.Second)
	m := command("msg-1", `{"action":"ok"}`)
	m.ApplicationProperties = map[string]any{"kind": "test", "n": 7}
	if err := h.Publish(context.Background(), "echo", m); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, h)
	recs := a.records(t)
	if len(recs) != 1 {
		t.Fatalf("got %d invocations; want 1", len(recs))
	}
	r := recs[0]
	md := r.Metadata
	checks := []struct {
		what string
		ok   bool
	}{
		{"function", r.Function == "Echo"},
		{"body delivered as is", r.Body == `{"action":"ok"}`},
		{"DeliveryCount 1", md.DeliveryCount == 1},
		{"SequenceNumber 1", md.SequenceNumber == 1},
		{"MessageId unquoted", md.MessageID == "msg-1"},
		{"ContentType unquoted", md.ContentType == "application/json"},
		{"LockToken is a bare GUID", len(md.LockToken) == 36 && !strings.Contains(md.LockToken, `"`)},
		{"EnqueuedTimeUtc read as UTC", md.EnqueuedTimeUTC.After(before) && md.EnqueuedTimeUTC.Before(time.Now())},
		{"application properties", md.ApplicationProperties["kind"] == "test" && md.ApplicationProperties["n"] == float64(7)},
		{"sys.MethodName", md.Sys.MethodName == "Echo"},
		{"sys.UtcNow", md.Sys.UtcNow.After(before)},
		{"sys.RandGuid", len(md.Sys.RandGuid) == 36},
		{"no SessionId outside sessions", md.SessionID == ""},
		{"invocation id header", r.InvocationID != "" && r.InvocationID == r.Headers["X-Azure-Functions-InvocationId"]},
		{"user agent", r.Headers["User-Agent"] == "Azure-Functions-Host/"+HostVersion},
		{"host version", r.Headers["X-Azure-Functions-HostVersion"] == HostVersion},
		{"worker id", len(r.Env["WORKER_ID"]) == 36},
		{"bus URL in env", r.Env["BUS_URL"] == h.BusURL()},
		{"app settings in env", r.Env["APP_SETTING"] == "from-settings"},
		// The host's quirks reached the handler, and were decoded.
		{"LockToken double-quoted on the wire", strings.HasPrefix(string(md.Raw["LockToken"]), `"\"`)},
		{"DeliveryCount a string on the wire", string(md.Raw["DeliveryCount"]) == `"1"`},
		{"EnqueuedTimeUtc without offset on the wire", !strings.HasSuffix(strings.Trim(string(md.Raw["EnqueuedTimeUtc"]), `"`), "Z")},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: record %+v", c.what, r)
		}
	}
	s := h.Stats()["echo"]
	if s.Completed != 1 || s.Delivered != 1 || s.Active != 0 {
		t.Errorf("stats = %+v", s)
	}
	if fs := h.FunctionStats()["Echo"]; fs.Succeeded != 1 || fs.Failed != 0 {
		t.Errorf("function stats = %+v", fs)
	}
}

// TestRetriesThenDeadLetter: a failed invocation is retried up to
// maxDeliveryCount and then dead-lettered with Service Bus's own reason.
// As in the real host, a non-2xx answer's Logs are dropped (the host
// reports only the status); the handler's reason reaches the log through
// its stderr, as it reaches traces in Azure.
func TestRetriesThenDeadLetter(t *testing.T) {
	tests := []struct {
		name, queue, body string
		// wantHost is the host's own failure report; wantStderr the
		// handler's stderr lines, where the reason must be.
		wantHost, wantStderr []string
		wantRecords          int
	}{
		{name: "transient error", queue: "echo", body: `{"action":"fail500"}`, wantRecords: 3,
			wantHost:   []string{"(Failed, Id=", "Response status code does not indicate success: 500 (Internal Server Error)."},
			wantStderr: []string{"error: told to fail with 500"}},
		{name: "permanent error", queue: "echo", body: `{"action":"fail400"}`, wantRecords: 3,
			wantHost:   []string{"Response status code does not indicate success: 400 (Bad Request)."},
			wantStderr: []string{"error: permanent: told to fail with 400"}},
		{name: "panic", queue: "echo", body: `{"action":"panic"}`, wantRecords: 3,
			wantHost:   []string{"Response status code does not indicate success: 500 (Internal Server Error)."},
			wantStderr: []string{"error: panic: told to panic", "goroutine"}},
		{name: "body that is not a command", queue: "echo", body: `not json`,
			wantHost:   []string{"Response status code does not indicate success: 400 (Bad Request)."},
			wantStderr: []string{"body is not a command"}},
		{name: "2xx with a body that is not JSON", queue: "raw", body: `{"action":"ok"}`,
			wantHost: []string{"Invalid HttpResponseMessage: POST /Raw answered 200 OK with a body that is not JSON: all good, not JSON"}},
	}
	a := newApp(t, testHostJSON, testFunctions)
	opts := a.options()
	opts.MaxDeliveryCount = 3
	h := a.start(t, opts)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.Remove(a.record); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			a.log.Reset()
			id := "m-" + strings.ReplaceAll(tt.name, " ", "-")
			if err := h.Publish(context.Background(), tt.queue, command(id, tt.body)); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, h)
			recs := a.records(t)
			if len(recs) != tt.wantRecords {
				t.Fatalf("handler saw %d deliveries; want %d", len(recs), tt.wantRecords)
			}
			for i, r := range recs {
				if r.Metadata.DeliveryCount != i+1 {
					t.Errorf("delivery %d has DeliveryCount %d", i+1, r.Metadata.DeliveryCount)
				}
			}
			dl, err := h.DeadLetters(tt.queue)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(dl, func(d localbus.DeadLetter) bool { return d.ID == id })
			if i < 0 {
				t.Fatalf("message %s not dead-lettered; dead letters: %+v", id, dl)
			}
			d := dl[i]
			if d.DeadLetterReason != localbus.ReasonMaxDeliveryCountExceeded || d.DeliveryCount != 3 || string(d.Body) != tt.body {
				t.Errorf("dead letter = %+v", d)
			}
			// Service Bus writes its own description, never the
			// handler's error.
			if want := fmt.Sprintf("Message could not be consumed after %d delivery attempts.", d.DeliveryCount); d.DeadLetterErrorDescription != want {
				t.Errorf("description %q; want %q", d.DeadLetterErrorDescription, want)
			}
			host, stderr := a.log.lines("funchost: "), a.log.lines("handler: ")
			for _, want := range tt.wantHost {
				if !strings.Contains(host, want) {
					t.Errorf("host log does not contain %q:\n%s", want, host)
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("handler stderr does not contain %q:\n%s", want, stderr)
				}
				if strings.Contains(host, want) {
					t.Errorf("host log carries the handler's Logs line %q from a non-2xx answer; the real host drops them:\n%s", want, host)
				}
			}
		})
	}
}

// TestLogsOfSuccess: a 2xx answer's Logs reach the function's log, as the
// real host logs them under Function.<Name>.User.
func TestLogsOfSuccess(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	h := a.start(t, a.options())
	if err := h.Publish(context.Background(), "echo", command("ok", `{"action":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, h)
	if host := a.log.lines("funchost: "); !strings.Contains(host, `Function.Echo.User (Id=`) || !strings.Contains(host, `Echo: action "ok", delivery 1`) {
		t.Errorf("host log lacks the success's Logs line:\n%s", host)
	}
}

// TestRights: with a rights table the host receives as the Functions
// identity, gives the handler that identity's credential, and the bus
// refuses what the table does not grant, as Service Bus's 401; a trigger
// queue without Manage gets the scale monitor's warning.
func TestRights(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	opts := a.options()
	opts.Settings["PROVISION_QUEUE"] = "echo" // logical provision is the entity echo
	opts.Rights = []bus.Grant{
		{Identity: bus.IdentityFunctions, Queue: bus.QueueProvision, Claims: []bus.Claim{bus.ClaimListen, bus.ClaimManage, bus.ClaimSend}},
		{Identity: bus.IdentityFunctions, Queue: "ordered", Claims: []bus.Claim{bus.ClaimListen, bus.ClaimManage}},
		{Identity: bus.IdentityFunctions, Queue: "raw", Claims: []bus.Claim{bus.ClaimListen}},
		{Identity: bus.IdentityRelay, Queue: bus.QueueProvision, Claims: []bus.Claim{bus.ClaimSend}},
	}
	h := a.start(t, opts)
	ctx := context.Background()
	cred := h.Bus().Credential(bus.IdentityFunctions)
	functions := bus.NewHTTPPublisherWithCredential(h.BusURL(), nil, cred)
	if err := functions.Publish(ctx, "echo", command("self", `{"action":"ok"}`)); err != nil {
		t.Fatalf("functions → echo (provision): %v", err)
	}
	relay := bus.NewHTTPPublisherWithCredential(h.BusURL(), nil, h.Bus().Credential(bus.IdentityRelay))
	if err := relay.Publish(ctx, "echo", command("relayed", `{"action":"ok"}`)); err != nil {
		t.Fatalf("relay → echo (provision): %v", err)
	}
	for name, err := range map[string]error{
		"functions → ordered": functions.Publish(ctx, "ordered", bus.Message{ID: "x", SessionID: "s", Body: []byte(`{}`)}),
		"relay → raw":         relay.Publish(ctx, "raw", command("x", `{}`)),
	} {
		if !bus.IsUnauthorized(err) || !strings.Contains(err.Error(), "'Send' claim(s) are required") {
			t.Errorf("%s: %v; want Service Bus's unauthorized error", name, err)
		}
	}
	waitIdle(t, h)
	recs := a.records(t)
	if len(recs) != 2 || recs[0].Env["BUS_CREDENTIAL"] != cred {
		t.Fatalf("records = %+v; want 2 invocations, the handler holding the Functions identity's credential", recs)
	}
	host := a.log.lines("funchost: ")
	if !strings.Contains(host, "does not have Manage claim for queue 'raw'") || strings.Contains(host, "Manage claim for queue 'echo'") {
		t.Errorf("host log: want the scale monitor's warning for raw only:\n%s", host)
	}
}

func TestDuplicateDeliveredOnce(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	h := a.start(t, a.options())
	ctx := context.Background()
	for range 3 {
		if err := h.Publish(ctx, "echo", command("same-id", `{"action":"ok"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Publish(ctx, "echo", command("other-id", `{"action":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, h)
	var ids []string
	for _, r := range a.records(t) {
		ids = append(ids, r.Metadata.MessageID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"other-id", "same-id"}) {
		t.Errorf("delivered %q; want each id once", ids)
	}
	if s := h.Stats()["echo"]; s.Duplicates != 2 {
		t.Errorf("duplicates = %d; want 2", s.Duplicates)
	}
}

func TestScheduledDelivery(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	h := a.start(t, a.options())
	at := time.Now().Add(800 * time.Millisecond)
	m := command("later", `{"action":"ok"}`)
	m.ScheduledEnqueueTime = at
	if err := h.Publish(context.Background(), "echo", m); err != nil {
		t.Fatal(err)
	}
	if s := h.Stats()["echo"]; s.Scheduled != 1 {
		t.Fatalf("stats = %+v; want 1 scheduled", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitIdleUntil(ctx, at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	recs := a.records(t)
	if len(recs) != 1 {
		t.Fatalf("got %d invocations; want 1", len(recs))
	}
	if recs[0].Start.Before(at) {
		t.Errorf("delivered at %v, before its scheduled time %v", recs[0].Start, at)
	}
}

func TestSessionOrdering(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	h := a.start(t, a.options())
	var msgs []bus.Message
	for i := range 4 {
		for _, s := range []string{"A", "B", "C"} {
			m := command(fmt.Sprintf("%s%d", s, i), `{"action":"sleep","ms":80}`)
			m.SessionID = s
			msgs = append(msgs, m)
		}
	}
	if err := h.Publish(context.Background(), "ordered", msgs...); err != nil {
		t.Fatal(err)
	}
	// A session queue refuses a message without a session, as Service Bus does.
	if err := h.Publish(context.Background(), "ordered", command("nosession", `{}`)); err == nil ||
		!strings.Contains(err.Error(), "requires sessions") {
		t.Errorf("Publish without a session = %v; want a session error", err)
	}
	waitIdle(t, h)
	recs := a.records(t)
	if len(recs) != len(msgs) {
		t.Fatalf("got %d invocations; want %d", len(recs), len(msgs))
	}
	bySession := map[string][]record{}
	for _, r := range recs {
		if r.Metadata.SessionID == "" || r.Metadata.SessionID != r.Metadata.MessageID[:1] {
			t.Errorf("message %s has SessionId %q", r.Metadata.MessageID, r.Metadata.SessionID)
		}
		bySession[r.Metadata.SessionID] = append(bySession[r.Metadata.SessionID], r)
	}
	for s, rs := range bySession {
		slices.SortFunc(rs, func(a, b record) int { return a.Start.Compare(b.Start) })
		for i, r := range rs {
			if want := fmt.Sprintf("%s%d", s, i); r.Metadata.MessageID != want {
				t.Errorf("session %s: invocation %d handled %s; want %s", s, i, r.Metadata.MessageID, want)
			}
			if i > 0 && r.Start.Before(rs[i-1].End) {
				t.Errorf("session %s: %s started before %s ended", s, r.Metadata.MessageID, rs[i-1].Metadata.MessageID)
			}
		}
	}
	// Different sessions run in parallel: 12 × 80 ms one by one would take
	// 960 ms; three sessions at once take about 320 ms.
	slices.SortFunc(recs, func(a, b record) int { return a.Start.Compare(b.Start) })
	overlap := false
	for i := 1; i < len(recs); i++ {
		if recs[i].Start.Before(recs[i-1].End) {
			overlap = true
		}
	}
	if !overlap {
		t.Errorf("no two sessions ran at the same time")
	}
}

func TestHandlerCrashRestartsAndRedelivers(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	h := a.start(t, a.options())
	pid := h.HandlerPID()
	if err := h.Publish(context.Background(), "echo", command("crash", `{"action":"exit","until":1}`)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, h)
	recs := a.records(t)
	if len(recs) != 2 {
		t.Fatalf("got %d invocations; want 2 (the crash and the redelivery)", len(recs))
	}
	if recs[0].PID != pid || recs[0].Metadata.DeliveryCount != 1 {
		t.Errorf("first delivery: pid %d delivery %d; want pid %d delivery 1", recs[0].PID, recs[0].Metadata.DeliveryCount, pid)
	}
	if recs[1].PID == pid || recs[1].Metadata.DeliveryCount != 2 {
		t.Errorf("redelivery: pid %d delivery %d; want a new process and delivery 2", recs[1].PID, recs[1].Metadata.DeliveryCount)
	}
	if h.Restarts() != 1 {
		t.Errorf("Restarts = %d; want 1", h.Restarts())
	}
	if dl, _ := h.DeadLetters("echo"); len(dl) != 0 {
		t.Errorf("dead letters = %+v", dl)
	}
	if s := h.Stats()["echo"]; s.Completed != 1 || s.Abandoned != 1 {
		t.Errorf("stats = %+v; want 1 abandoned, 1 completed", s)
	}
}

func TestTimerTrigger(t *testing.T) {
	fns := map[string]string{
		"Tick": `{"bindings":[{"name":"timer","type":"timerTrigger","direction":"in","schedule":"%TICK_SCHEDULE%","runOnStartup":true}]}`,
	}
	a := newApp(t, testHostJSON, fns)
	opts := a.options()
	opts.Settings["TICK_SCHEDULE"] = "*/1 * * * * *"
	start := time.Now()
	h := a.start(t, opts)
	deadline := time.Now().Add(10 * time.Second)
	for len(a.records(t)) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	h.Stop()
	recs := a.records(t)
	if len(recs) < 3 {
		t.Fatalf("timer fired %d times; want 3 (startup and two seconds)", len(recs))
	}
	first, second := recs[0], recs[1]
	if first.Timer == nil || first.Timer.ScheduleStatus != nil || !first.Timer.Schedule.AdjustForDST {
		t.Errorf("startup run: timer %+v; want no ScheduleStatus", first.Timer)
	}
	if first.Start.Sub(start) > 5*time.Second {
		t.Errorf("runOnStartup ran %s after start", first.Start.Sub(start))
	}
	if second.Timer == nil || second.Timer.ScheduleStatus == nil || second.Timer.ScheduleStatus.Next.IsZero() {
		t.Fatalf("second run: timer %+v; want a ScheduleStatus", second.Timer)
	}
	if second.Start.Nanosecond() > int(500*time.Millisecond) && second.Start.Sub(first.Start) < 900*time.Millisecond {
		t.Errorf("second run at %v is not on a schedule second", second.Start)
	}
	if second.Metadata.Sys.MethodName != "Tick" {
		t.Errorf("MethodName = %q", second.Metadata.Sys.MethodName)
	}
}

func TestHTTPBus(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	opts := a.options()
	opts.MaxDeliveryCount = 1
	h := a.start(t, opts)
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, h.BusURL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	msgs, _ := json.Marshal([]bus.Message{command("h1", `{"action":"ok"}`), command("h2", `{"action":"fail400"}`)})
	if status, out := do("POST", "/queues/echo/messages", string(msgs)); status != http.StatusAccepted {
		t.Fatalf("POST messages = %d %s", status, out)
	}
	waitIdle(t, h)
	if n := len(a.records(t)); n != 2 {
		t.Fatalf("got %d invocations; want 2", n)
	}
	status, out := do("GET", "/queues/echo/deadletter", "")
	var dl []localbus.DeadLetter
	if err := json.Unmarshal(out, &dl); status != 200 || err != nil || len(dl) != 1 || dl[0].ID != "h2" ||
		dl[0].DeadLetterErrorDescription != "Message could not be consumed after 1 delivery attempts." {
		t.Fatalf("GET deadletter = %d %s", status, out)
	}
	status, out = do("GET", "/queues", "")
	var stats map[string]localbus.QueueStats
	if err := json.Unmarshal(out, &stats); status != 200 || err != nil {
		t.Fatalf("GET /queues = %d %s", status, out)
	}
	if s := stats["echo"]; s.Delivered != 2 || s.Completed != 1 || s.DeadLettered != 1 {
		t.Errorf("echo stats = %+v", s)
	}
	if s, ok := stats["ordered"]; !ok || !s.RequiresSession {
		t.Errorf("ordered queue stats = %+v, %t; want a session queue created from function.json", s, ok)
	}
	if status, out := do("GET", "/queues/nope/deadletter", ""); status != 404 || !bytes.Contains(out, []byte(`queue \"nope\" does not exist`)) {
		t.Errorf("GET unknown dead letters = %d %s", status, out)
	}
	if _, err := h.DeadLetters("nope"); err == nil {
		t.Errorf("DeadLetters(nope) succeeded")
	}
}

// TestStopWaitsForInFlight: Stop lets an invocation that has started finish
// (the handler drains on SIGTERM) and counts it as a success.
func TestStopWaitsForInFlight(t *testing.T) {
	a := newApp(t, testHostJSON, testFunctions)
	h := a.start(t, a.options())
	if err := h.Publish(context.Background(), "echo", command("slow", `{"action":"sleep","ms":400}`)); err != nil {
		t.Fatal(err)
	}
	for h.Stats()["echo"].InFlight == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the request reach the handler
	h.Stop()
	if fs := h.FunctionStats()["Echo"]; fs.Succeeded != 1 {
		t.Errorf("function stats after Stop = %+v; want the in-flight invocation to succeed", fs)
	}
}

func TestStartErrors(t *testing.T) {
	good := testFunctions["Echo"]
	tests := []struct {
		name      string
		hostJSON  string
		functions map[string]string
		edit      func(*Options)
		wantErr   []string
	}{
		{name: "unknown binding type names the file", functions: map[string]string{
			"Echo": `{"bindings":[{"name":"req","type":"httpTrigger","direction":"in"}]}`},
			wantErr: []string{filepath.Join("functions", "Echo", "function.json"), `binding type "httpTrigger" is not supported`}},
		{name: "output binding", functions: map[string]string{"Echo": `{"bindings":[
			{"name":"msg","type":"serviceBusTrigger","queueName":"q"},{"name":"out","type":"serviceBus","direction":"out","queueName":"q"}]}`},
			wantErr: []string{`bindings[1] (serviceBus "out")`, "not supported"}},
		{name: "missing app setting", functions: map[string]string{
			"Echo": `{"bindings":[{"name":"msg","type":"serviceBusTrigger","queueName":"%NO_SUCH_SETTING_X%"}]}`},
			wantErr: []string{"app setting NO_SUCH_SETTING_X, which is not set"}},
		{name: "five-field schedule", functions: map[string]string{
			"Tick": `{"bindings":[{"name":"timer","type":"timerTrigger","schedule":"*/5 * * * *"}]}`},
			wantErr: []string{`schedule "*/5 * * * *" has 5 fields; want six-field NCRONTAB`}},
		{name: "bad schedule", functions: map[string]string{
			"Tick": `{"bindings":[{"name":"timer","type":"timerTrigger","schedule":"0 */5 * * * mon-xyz"}]}`},
			wantErr: []string{`Tick`, `schedule "0 */5 * * * mon-xyz"`}},
		{name: "two triggers", functions: map[string]string{"Echo": `{"bindings":[
			{"name":"a","type":"serviceBusTrigger","queueName":"q"},{"name":"b","type":"timerTrigger","schedule":"* * * * * *"}]}`},
			wantErr: []string{"a second trigger"}},
		{name: "no trigger", functions: map[string]string{"Echo": `{"bindings":[]}`},
			wantErr: []string{"no bindings"}},
		{name: "conflicting session modes", functions: map[string]string{"Echo": good,
			"Other": `{"bindings":[{"name":"msg","type":"serviceBusTrigger","queueName":"echo","isSessionsEnabled":true}]}`},
			wantErr: []string{`queue "echo" already exists with requiresSession=false`}},
		{name: "no functions", functions: map[string]string{},
			wantErr: []string{"no function found"}},
		{name: "bad host.json version", hostJSON: `{"version":"1.0","customHandler":{"description":{"defaultExecutablePath":"echohandler"}}}`,
			wantErr: []string{"host.json", `version is "1.0"`}},
		{name: "autoCompleteMessages false", hostJSON: `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"echohandler","workingDirectory":"bin"}},
			"extensions":{"serviceBus":{"autoCompleteMessages":false}}}`,
			wantErr: []string{"autoCompleteMessages is false"}},
		{name: "bad lock renewal", hostJSON: `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"echohandler","workingDirectory":"bin"}},
			"extensions":{"serviceBus":{"maxAutoLockRenewalDuration":"5m"}}}`,
			wantErr: []string{`maxAutoLockRenewalDuration: "5m" is not a TimeSpan`}},
		{name: "missing executable", hostJSON: `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"nope/handler"}}}`,
			wantErr: []string{`handler executable "nope/handler" not found`}},
		{name: "handler that never listens", edit: func(o *Options) { o.Executable = "/bin/true" },
			wantErr: []string{"exited before it listened"}},
		{name: "handler that never answers", hostJSON: `{"version":"2.0","customHandler":{"description":{
			"defaultExecutablePath":"/bin/sleep","arguments":["%SLEEP_SECS%"]}}}`,
			edit:    func(o *Options) { o.Settings["SLEEP_SECS"] = "30"; o.StartupTimeout = 500 * time.Millisecond },
			wantErr: []string{"/bin/sleep did not answer GET", "within 500ms"}},
		{name: "missing app setting in arguments", hostJSON: `{"version":"2.0","customHandler":{"description":{
			"defaultExecutablePath":"/bin/sleep","arguments":["%NO_SUCH_SETTING_Y%"]}}}`,
			wantErr: []string{"customHandler.description.arguments[0]", "NO_SUCH_SETTING_Y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hj := tt.hostJSON
			if hj == "" {
				hj = testHostJSON
			}
			fns := tt.functions
			if fns == nil {
				fns = map[string]string{"Echo": good}
			}
			a := newApp(t, hj, fns)
			opts := a.options()
			if tt.edit != nil {
				tt.edit(&opts)
			}
			h, err := Start(context.Background(), opts)
			if err == nil {
				h.Stop()
				t.Fatalf("Start succeeded; want an error containing %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestExecutableOverride(t *testing.T) {
	// host.json names a handler that does not exist; the app setting, as in
	// Azure, points at the real one.
	a := newApp(t, `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"missing"}}}`, testFunctions)
	opts := a.options()
	opts.Settings[ExecutableSetting] = filepath.Join("bin", "echohandler")
	h := a.start(t, opts)
	if err := h.Publish(context.Background(), "echo", command("x", `{"action":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, h)
	if n := len(a.records(t)); n != 1 {
		t.Errorf("got %d invocations; want 1", n)
	}
}

// lines returns the log's lines that start with prefix.
func (l *lockedBuffer) lines(prefix string) string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
