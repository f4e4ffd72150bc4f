package localbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// newBus returns a bus with queue "q" (duplicate detection on, as
// karpfunc's queues are deployed); tests create other queues themselves.
func newBus(t *testing.T, opts Options) (*Bus, *clocktesting.FakeClock) {
	t.Helper()
	b, clk := newBareBus(t, opts)
	if err := b.CreateQueue("q", QueueOptions{RequiresDuplicateDetection: true}); err != nil {
		t.Fatal(err)
	}
	return b, clk
}

// newBareBus returns a bus without queues.
func newBareBus(t *testing.T, opts Options) (*Bus, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	opts.Clock = clk
	return New(opts), clk
}

// receive expects a message now.
func receive(t *testing.T, b *Bus, queue string) *Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d, err := b.Receive(ctx, queue)
	if err != nil {
		t.Fatalf("Receive(%s): %v", queue, err)
	}
	return d
}

// nothing expects no deliverable message now.
func nothing(t *testing.T, b *Bus, queue string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	d, err := b.Receive(ctx, queue)
	if err == nil {
		t.Fatalf("Receive(%s) = message %q (delivery %d); want nothing", queue, d.Message.ID, d.DeliveryCount)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive(%s): %v; want a timeout", queue, err)
	}
}

func msg(id, session string) bus.Message {
	return bus.Message{ID: id, SessionID: session, Body: []byte(`{"id":"` + id + `"}`)}
}

func TestDuplicateDetection(t *testing.T) {
	b, clk := newBus(t, Options{DuplicateDetectionWindow: time.Minute})
	ctx := context.Background()
	if err := b.Publish(ctx, "q", msg("a", ""), msg("a", ""), msg("b", "")); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, "q", msg("a", "")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b"} {
		d := receive(t, b, "q")
		if d.Message.ID != want {
			t.Fatalf("got %q; want %q", d.Message.ID, want)
		}
		if err := b.Complete(d); err != nil {
			t.Fatal(err)
		}
	}
	nothing(t, b, "q")
	if s := b.Stats()["q"]; s.Duplicates != 2 || s.Completed != 2 {
		t.Errorf("stats = %+v; want 2 duplicates, 2 completed", s)
	}
	// After the window the same id is a new message.
	clk.Step(time.Minute)
	if err := b.Publish(ctx, "q", msg("a", "")); err != nil {
		t.Fatal(err)
	}
	if d := receive(t, b, "q"); d.Message.ID != "a" {
		t.Fatalf("got %q after the window; want a", d.Message.ID)
	}
}

// TestDuplicateDetectionIsPerQueue: a queue created without duplicate
// detection enqueues every message, as Service Bus does.
func TestDuplicateDetectionIsPerQueue(t *testing.T) {
	b, _ := newBus(t, Options{})
	if err := b.CreateQueue("plain", QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, q := range []string{"q", "plain"} {
		if err := b.Publish(ctx, q, msg("a", ""), msg("a", "")); err != nil {
			t.Fatal(err)
		}
	}
	stats := b.Stats()
	if s := stats["q"]; s.Active != 1 || s.Duplicates != 1 {
		t.Errorf("queue with duplicate detection: %+v; want 1 active, 1 duplicate", s)
	}
	if s := stats["plain"]; s.Active != 2 || s.Duplicates != 0 {
		t.Errorf("queue without duplicate detection: %+v; want 2 active, 0 duplicates", s)
	}
}

// TestDuplicateDetectionWindowIsPerQueue: each queue remembers IDs for its
// own window.
func TestDuplicateDetectionWindowIsPerQueue(t *testing.T) {
	b, clk := newBus(t, Options{DuplicateDetectionWindow: 10 * time.Minute})
	if err := b.CreateQueue("short", QueueOptions{RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, q := range []string{"q", "short"} {
		if err := b.Publish(ctx, q, msg("a", "")); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(2 * time.Minute)
	for _, q := range []string{"q", "short"} {
		if err := b.Publish(ctx, q, msg("a", "")); err != nil {
			t.Fatal(err)
		}
	}
	stats := b.Stats()
	if s := stats["q"]; s.Active != 1 || s.Duplicates != 1 {
		t.Errorf("queue with the bus's 10m window: %+v; want the repeat dropped", s)
	}
	if s := stats["short"]; s.Active != 2 || s.Duplicates != 0 {
		t.Errorf("queue with a 1m window: %+v; want the repeat after 2m enqueued", s)
	}
}

func TestScheduledDelivery(t *testing.T) {
	b, clk := newBus(t, Options{})
	ctx := context.Background()
	later, soon := msg("later", ""), msg("soon", "")
	later.ScheduledEnqueueTime = t0.Add(10 * time.Minute)
	soon.ScheduledEnqueueTime = t0.Add(time.Minute)
	if err := b.Publish(ctx, "q", later, soon); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats()["q"]; s.Scheduled != 2 || s.Active != 0 {
		t.Fatalf("stats = %+v; want 2 scheduled", s)
	}
	nothing(t, b, "q")
	if b.Idle(t0.Add(30*time.Second)) != true || b.Idle(t0.Add(2*time.Minute)) != false {
		t.Errorf("Idle: a message scheduled at +1m must count before +2m only")
	}
	// A receiver already waiting is woken by the clock.
	got := make(chan string, 1)
	go func() {
		d, err := b.Receive(ctx, "q")
		if err == nil {
			err = b.Complete(d)
		}
		if err != nil {
			got <- err.Error()
			return
		}
		got <- d.Message.ID
	}()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(59 * time.Second)
	select {
	case id := <-got:
		t.Fatalf("got %q before its time", id)
	case <-time.After(30 * time.Millisecond):
	}
	clk.Step(time.Second)
	select {
	case id := <-got:
		if id != "soon" {
			t.Fatalf("got %q; want soon", id)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("scheduled message not delivered at its time")
	}
	nothing(t, b, "q")
	clk.Step(9 * time.Minute)
	if d := receive(t, b, "q"); d.Message.ID != "later" || !d.EnqueuedTime.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("got %q enqueued %v; want later at +10m", d.Message.ID, d.EnqueuedTime)
	}
}

func TestSessions(t *testing.T) {
	b, clk := newBus(t, Options{RetryDelay: time.Second})
	ctx := context.Background()
	if err := b.CreateQueue("s", QueueOptions{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, "s", msg("a1", "A"), msg("a2", "A"), msg("b1", "B"), msg("a3", "A")); err != nil {
		t.Fatal(err)
	}
	a1 := receive(t, b, "s")
	b1 := receive(t, b, "s")
	if a1.Message.ID != "a1" || b1.Message.ID != "b1" {
		t.Fatalf("got %q, %q; want a1 then b1 (A is busy)", a1.Message.ID, b1.Message.ID)
	}
	nothing(t, b, "s") // A busy, B empty
	// A failed delivery keeps its place: a2 must wait for a1's retry.
	if err := b.Abandon(a1, "boom"); err != nil {
		t.Fatal(err)
	}
	nothing(t, b, "s")
	clk.Step(time.Second)
	a1 = receive(t, b, "s")
	if a1.Message.ID != "a1" || a1.DeliveryCount != 2 {
		t.Fatalf("got %q delivery %d; want a1 delivery 2", a1.Message.ID, a1.DeliveryCount)
	}
	if err := b.Complete(a1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a2", "a3"} {
		d := receive(t, b, "s")
		if d.Message.ID != want {
			t.Fatalf("got %q; want %q", d.Message.ID, want)
		}
		nothing(t, b, "s")
		if err := b.Complete(d); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetryAndDeadLetter(t *testing.T) {
	b, clk := newBus(t, Options{MaxDeliveryCount: 3, RetryDelay: 5 * time.Second})
	ctx := context.Background()
	if err := b.Publish(ctx, "q", msg("m", "")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		d := receive(t, b, "q")
		if d.DeliveryCount != i {
			t.Fatalf("delivery %d has DeliveryCount %d", i, d.DeliveryCount)
		}
		if err := b.Abandon(d, fmt.Sprintf("500: attempt %d failed", i)); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			clk.Step(4 * time.Second)
			nothing(t, b, "q") // retry delay not over
			clk.Step(time.Second)
		}
	}
	nothing(t, b, "q")
	dl, err := b.DeadLetters("q")
	if err != nil {
		t.Fatal(err)
	}
	if len(dl) != 1 || dl[0].ID != "m" || dl[0].DeadLetterReason != ReasonMaxDeliveryCountExceeded ||
		dl[0].DeadLetterErrorDescription != "Message could not be consumed after 3 delivery attempts." || dl[0].DeliveryCount != 3 {
		t.Fatalf("dead letters = %+v", dl)
	}
	s := b.Stats()["q"]
	if s.Active != 0 || s.DeadLettered != 1 || s.Delivered != 3 || s.Abandoned != 3 {
		t.Errorf("stats = %+v", s)
	}
	if !b.Idle(t0.Add(time.Hour)) {
		t.Errorf("bus with only dead letters is not idle")
	}
}

func TestLockExpiry(t *testing.T) {
	b, clk := newBus(t, Options{LockDuration: time.Minute, MaxAutoLockRenewal: 2 * time.Minute, RetryDelay: time.Second})
	ctx := context.Background()
	if err := b.Publish(ctx, "q", msg("m", "")); err != nil {
		t.Fatal(err)
	}
	d := receive(t, b, "q")
	if want := t0.Add(2 * time.Minute); !d.LockedUntil.Equal(want) {
		t.Errorf("LockedUntil = %v; want %v (auto-renewal)", d.LockedUntil, want)
	}
	clk.Step(119 * time.Second)
	nothing(t, b, "q")
	clk.Step(time.Second)
	clk.Step(time.Second) // retry delay
	d2 := receive(t, b, "q")
	if d2.DeliveryCount != 2 {
		t.Errorf("redelivery after lock expiry has DeliveryCount %d; want 2", d2.DeliveryCount)
	}
	if err := b.Complete(d); !errors.Is(err, ErrLockLost) {
		t.Errorf("Complete with the expired lock = %v; want ErrLockLost", err)
	}
	if err := b.Complete(d2); err != nil {
		t.Errorf("Complete: %v", err)
	}
	if err := b.Abandon(d2, "x"); !errors.Is(err, ErrLockLost) {
		t.Errorf("Abandon after Complete = %v; want ErrLockLost", err)
	}
}

func TestInvalid(t *testing.T) {
	b, _ := newBus(t, Options{MaxMessageBytes: 10})
	ctx := context.Background()
	if err := b.CreateQueue("s", QueueOptions{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{name: "session queue needs a session id", run: func() error { return b.Publish(ctx, "s", bus.Message{ID: "x"}) },
			wantErr: `queue "s": message 0: the queue requires sessions and the message has no sessionId`},
		{name: "long id", run: func() error { return b.Publish(ctx, "q", bus.Message{ID: strings.Repeat("x", 129)}) },
			wantErr: "message 0: id is 129 characters; the limit is 128"},
		{name: "big body", run: func() error {
			return b.Publish(ctx, "q", bus.Message{ID: "ok"}, bus.Message{ID: "big", Body: make([]byte, 11)})
		}, wantErr: "message 1: body is 11 bytes; the limit is 10"},
		{name: "bad queue name", run: func() error { return b.Publish(ctx, "a b", bus.Message{ID: "x"}) },
			wantErr: `invalid queue name "a b"`},
		{name: "receive from an unknown queue", run: func() error { _, err := b.Receive(ctx, "nope"); return err },
			wantErr: `queue "nope" does not exist`},
		{name: "publish to an unknown queue", run: func() error { return b.Publish(ctx, "nope", bus.Message{ID: "x"}) },
			wantErr: `MessagingEntityNotFound: queue "nope" does not exist`},
		{name: "dead letters of an unknown queue", run: func() error { _, err := b.DeadLetters("nope"); return err },
			wantErr: `queue "nope" does not exist`},
		{name: "session mode conflict", run: func() error { return b.CreateQueue("s", QueueOptions{}) },
			wantErr: `queue "s" already exists with requiresSession=true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v; want %q", err, tt.wantErr)
			}
		})
	}
	// All or none: the valid first message of the rejected batch is not queued.
	if s, ok := b.Stats()["q"]; ok && s.Active != 0 {
		t.Errorf("a rejected batch left %d messages", s.Active)
	}
}

func TestWaitIdle(t *testing.T) {
	b, _ := New(Options{RetryDelay: 10 * time.Millisecond}), 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.CreateQueue("q", QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	far := msg("far", "")
	far.ScheduledEnqueueTime = time.Now().Add(time.Hour)
	if err := b.Publish(ctx, "q", msg("a", ""), far); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		d, err := b.Receive(ctx, "q")
		if err == nil {
			err = b.Complete(d)
		}
		if err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	if err := b.WaitIdle(ctx, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Errorf("WaitIdle returned before the message was completed")
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := b.WaitIdle(short, time.Now().Add(2*time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitIdle with a message scheduled before the horizon = %v; want a timeout", err)
	}
}

func TestHTTP(t *testing.T) {
	b, _ := newBus(t, Options{MaxDeliveryCount: 1})
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	m := bus.Message{ID: "m1", SessionID: "s", ContentType: "application/cloudevents+json", Body: []byte(`{"a":1}`),
		ApplicationProperties: map[string]any{"k": "v"}}
	body, _ := json.Marshal([]bus.Message{m})
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantBody                 string
	}{
		{name: "publish", method: "POST", path: "/queues/q/messages", body: string(body), wantStatus: 202, wantBody: `{"accepted":1}`},
		{name: "not an array", method: "POST", path: "/queues/q/messages", body: `{"id":"x"}`, wantStatus: 400,
			wantBody: "the body must be a JSON array of messages"},
		{name: "unknown field", method: "POST", path: "/queues/q/messages", body: `[{"id":"x","sesionId":"typo"}]`, wantStatus: 400,
			wantBody: `unknown field \"sesionId\"`},
		{name: "trailing data", method: "POST", path: "/queues/q/messages", body: `[] []`, wantStatus: 400,
			wantBody: "exactly one JSON array"},
		{name: "invalid message", method: "POST", path: "/queues/q/messages", body: `[{"id":"` + strings.Repeat("x", 200) + `"}]`,
			wantStatus: 400, wantBody: "id is 200 characters"},
		{name: "publish to an unknown queue", method: "POST", path: "/queues/nope/messages", body: string(body), wantStatus: 404,
			wantBody: `MessagingEntityNotFound`},
		{name: "dead letters of an unknown queue", method: "GET", path: "/queues/nope/deadletter", wantStatus: 404,
			wantBody: `queue \"nope\" does not exist`},
		{name: "empty dead letters", method: "GET", path: "/queues/q/deadletter", wantStatus: 200, wantBody: `[]`},
		{name: "unknown route", method: "DELETE", path: "/queues/q", wantStatus: 404, wantBody: "no route DELETE /queues/q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := do(tt.method, tt.path, tt.body)
			if status != tt.wantStatus || !strings.Contains(got, tt.wantBody) {
				t.Fatalf("%s %s = %d %s; want %d containing %s", tt.method, tt.path, status, got, tt.wantStatus, tt.wantBody)
			}
		})
	}
	d := receive(t, b, "q")
	if d.Message.ID != "m1" || d.Message.SessionID != "s" || string(d.Message.Body) != `{"a":1}` ||
		d.Message.ContentType != m.ContentType || d.Message.ApplicationProperties["k"] != "v" {
		t.Fatalf("received %+v; want %+v", d.Message, m)
	}
	if err := b.Abandon(d, "400 Bad Request: invalid message"); err != nil {
		t.Fatal(err)
	}
	status, got := do("GET", "/queues/q/deadletter", "")
	var dl []DeadLetter
	if err := json.Unmarshal([]byte(got), &dl); status != 200 || err != nil || len(dl) != 1 ||
		dl[0].ID != "m1" || string(dl[0].Body) != `{"a":1}` || dl[0].DeadLetterReason != ReasonMaxDeliveryCountExceeded ||
		dl[0].DeadLetterErrorDescription != "Message could not be consumed after 1 delivery attempts." {
		t.Fatalf("GET deadletter = %d %s (%v)", status, got, err)
	}
	if !strings.Contains(got, `"deadLetterReason":"MaxDeliveryCountExceeded"`) {
		t.Errorf("dead letter JSON lacks deadLetterReason: %s", got)
	}
	status, got = do("GET", "/queues", "")
	var stats map[string]QueueStats
	if err := json.Unmarshal([]byte(got), &stats); status != 200 || err != nil {
		t.Fatalf("GET /queues = %d %s", status, got)
	}
	if s := stats["q"]; s.DeadLettered != 1 || s.Delivered != 1 || s.Active != 0 {
		t.Errorf("stats = %+v", s)
	}
	if !strings.Contains(got, `"deadlettered":1`) {
		t.Errorf("stats JSON = %s", got)
	}
}
