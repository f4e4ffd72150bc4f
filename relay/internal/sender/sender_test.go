package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// flakyBus is a real local-bus HTTP endpoint that refuses the first failures
// requests with 503, then accepts, recording every message it accepted.
type flakyBus struct {
	mu       sync.Mutex
	failures int
	attempts int
	accepted []string // queue:id
}

func (f *flakyBus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msgs []bus.Message
	if err := json.NewDecoder(r.Body).Decode(&msgs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.failures > 0 {
		f.failures--
		http.Error(w, "bus unavailable", http.StatusServiceUnavailable)
		return
	}
	queue := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/queues/"), "/messages")
	for _, m := range msgs {
		f.accepted = append(f.accepted, queue+":"+m.ID)
	}
	w.WriteHeader(http.StatusAccepted)
}

func (f *flakyBus) snapshot() (attempts int, accepted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts, append([]string(nil), f.accepted...)
}

func msg(id string) bus.Message { return bus.Message{ID: id, Body: []byte(`{}`)} }

func TestSenderRetriesUntilPublished(t *testing.T) {
	tests := []struct {
		name         string
		failures     int
		send         func(s *Sender)
		wantAccepted []string
		wantWarnings int
	}{
		{name: "healthy bus", send: func(s *Sender) { s.Send(bus.QueueLifecycle, msg("a"), msg("b")) },
			wantAccepted: []string{"lifecycle:a", "lifecycle:b"}},
		{name: "transient failures are retried and logged", failures: 3, send: func(s *Sender) { s.Send(bus.QueueProvision, msg("p")) },
			wantAccepted: []string{"provision:p"}, wantWarnings: 3},
		{name: "same id on two queues is two messages", send: func(s *Sender) {
			s.Send(bus.QueueProvision, msg("x"))
			s.Send(bus.QueueLifecycle, msg("x"))
		}, wantAccepted: []string{"lifecycle:x", "provision:x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &flakyBus{failures: tt.failures}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			var logs bytes.Buffer
			s, err := New(Options{Publisher: bus.NewHTTPPublisher(ts.URL, ts.Client()), BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.Run(ctx); close(done) }()
			tt.send(s)

			deadline := time.Now().Add(10 * time.Second)
			for s.Pending() > 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			<-done
			if s.Pending() != 0 {
				t.Fatalf("%d message(s) still pending", s.Pending())
			}
			_, accepted := srv.snapshot()
			if strings.Join(slices.Sorted(slices.Values(accepted)), ",") != strings.Join(tt.wantAccepted, ",") {
				t.Errorf("accepted %v; want %v", accepted, tt.wantAccepted)
			}
			if got := strings.Count(logs.String(), "publishing failed; will retry"); got != tt.wantWarnings {
				t.Errorf("%d retry warnings; want %d\n%s", got, tt.wantWarnings, logs.String())
			}
			if tt.wantWarnings > 0 && !strings.Contains(logs.String(), "503 Service Unavailable: bus unavailable") {
				t.Errorf("retry log lacks the bus's reason:\n%s", logs.String())
			}
		})
	}
}

func TestSenderReportsUnsentAtShutdown(t *testing.T) {
	srv := &flakyBus{failures: 1 << 30} // never recovers
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var logs bytes.Buffer
	s, err := New(Options{Publisher: bus.NewHTTPPublisher(ts.URL, ts.Client()), BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	s.Send(bus.QueueLifecycle, msg("node/u1/ready=true"))
	s.Send(bus.QueueLifecycle, msg("node/u1/ready=true")) // a repeat while waiting collapses

	for {
		if attempts, _ := srv.snapshot(); attempts >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	if s.Pending() != 1 {
		t.Fatalf("Pending() = %d; want 1 (the repeat must collapse into one)", s.Pending())
	}
	if out := logs.String(); !strings.Contains(out, "relay stopping with unsent messages") || !strings.Contains(out, "lifecycle:node/u1/ready=true") {
		t.Fatalf("shutdown did not report the unsent message:\n%s", out)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "publisher is nil") {
		t.Errorf("New(no publisher) = %v", err)
	}
	p := bus.NewHTTPPublisher("http://127.0.0.1:1", nil)
	if _, err := New(Options{Publisher: p, BaseDelay: time.Second, MaxDelay: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "max delay 1ms is shorter than base delay 1s") {
		t.Errorf("New(max < base) = %v", err)
	}
}
