package batcher

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

func pod(name, rv string) messages.ObjectRef {
	return messages.ObjectRef{Namespace: "default", Name: name, UID: "uid-" + name, ResourceVersion: rv}
}

// step is one moment of a scenario: first advance the clock, then apply the
// pod changes, then Flush and compare.
type step struct {
	advance time.Duration
	add     []messages.ObjectRef
	remove  []string // UIDs
	want    []messages.ObjectRef
	// wantDeadline is the deadline after the step, relative to the start;
	// -1 means no window is open.
	wantDeadline time.Duration
}

func TestBatcher(t *testing.T) {
	const idle, max = time.Second, 10 * time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "empty batcher never flushes", steps: []step{
			{wantDeadline: -1},
			{advance: time.Hour, wantDeadline: -1},
		}},
		{name: "idle close", steps: []step{
			{add: []messages.ObjectRef{pod("a", "1")}, wantDeadline: time.Second},
			{advance: 999 * time.Millisecond, wantDeadline: time.Second},
			{advance: time.Millisecond, want: []messages.ObjectRef{pod("a", "1")}, wantDeadline: -1},
			{advance: time.Hour, wantDeadline: -1}, // nothing left to flush twice
		}},
		{name: "new pod extends the idle window", steps: []step{
			{add: []messages.ObjectRef{pod("b", "1")}, wantDeadline: time.Second},
			{advance: 900 * time.Millisecond, add: []messages.ObjectRef{pod("a", "1")}, wantDeadline: 1900 * time.Millisecond},
			{advance: 500 * time.Millisecond, wantDeadline: 1900 * time.Millisecond},
			{advance: 500 * time.Millisecond, want: []messages.ObjectRef{pod("a", "1"), pod("b", "1")}, wantDeadline: -1},
		}},
		{name: "max close under a steady trickle", steps: func() []step {
			s := []step{{add: []messages.ObjectRef{pod("p00", "1")}, wantDeadline: time.Second}}
			var all = []messages.ObjectRef{pod("p00", "1")}
			for i := 1; i <= 19; i++ { // one new pod every 500ms: idle never expires
				p := pod("p"+string(rune('0'+i/10))+string(rune('0'+i%10)), "1")
				all = append(all, p)
				at := time.Duration(i) * 500 * time.Millisecond
				dl := at + time.Second
				if dl > max {
					dl = max
				}
				s = append(s, step{advance: 500 * time.Millisecond, add: []messages.ObjectRef{p}, wantDeadline: dl})
			}
			// t=9.5s; at t=10s the max bound closes it although a pod came 500ms ago.
			return append(s, step{advance: 500 * time.Millisecond, want: all, wantDeadline: -1})
		}()},
		{name: "duplicate pod in window refreshes it without extending", steps: []step{
			{add: []messages.ObjectRef{pod("a", "1")}, wantDeadline: time.Second},
			{advance: 800 * time.Millisecond, add: []messages.ObjectRef{pod("a", "2")}, wantDeadline: time.Second},
			{advance: 200 * time.Millisecond, want: []messages.ObjectRef{pod("a", "2")}, wantDeadline: -1},
		}},
		{name: "duplicate in one call", steps: []step{
			{add: []messages.ObjectRef{pod("a", "1"), pod("a", "1")}, wantDeadline: time.Second},
			{advance: time.Second, want: []messages.ObjectRef{pod("a", "1")}, wantDeadline: -1},
		}},
		{name: "removing every pod closes the window without an event", steps: []step{
			{add: []messages.ObjectRef{pod("a", "1"), pod("b", "1")}, wantDeadline: time.Second},
			{advance: 500 * time.Millisecond, remove: []string{"uid-a", "uid-b", "uid-unknown"}, wantDeadline: -1},
			{advance: time.Hour, wantDeadline: -1},
		}},
		{name: "removed pod is left out, the rest flush", steps: []step{
			{add: []messages.ObjectRef{pod("a", "1"), pod("b", "1")}, wantDeadline: time.Second},
			{advance: 500 * time.Millisecond, remove: []string{"uid-a"}, wantDeadline: time.Second},
			{advance: 500 * time.Millisecond, want: []messages.ObjectRef{pod("b", "1")}, wantDeadline: -1},
		}},
		{name: "a pod after a flush opens a fresh window", steps: []step{
			{add: []messages.ObjectRef{pod("a", "1")}, wantDeadline: time.Second},
			{advance: time.Second, want: []messages.ObjectRef{pod("a", "1")}, wantDeadline: -1},
			{advance: 5 * time.Second, add: []messages.ObjectRef{pod("a", "3")}, wantDeadline: 7 * time.Second},
			{advance: time.Second, want: []messages.ObjectRef{pod("a", "3")}, wantDeadline: -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(start)
			b, err := New(Options{IdleDuration: idle, MaxDuration: max, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				clk.Step(s.advance)
				for _, p := range s.add {
					if err := b.Add(p); err != nil {
						t.Fatalf("step %d: Add(%s) = %v", i, p.Name, err)
					}
				}
				for _, uid := range s.remove {
					b.Remove(uid)
				}
				got := b.Flush()
				if !reflect.DeepEqual(got, s.want) {
					t.Fatalf("step %d (t=%s): Flush() = %v; want %v", i, clk.Since(start), got, s.want)
				}
				d, open := b.Deadline()
				switch {
				case s.wantDeadline < 0 && open:
					t.Fatalf("step %d: window open until %s; want none", i, d.Sub(start))
				case s.wantDeadline >= 0 && (!open || !d.Equal(start.Add(s.wantDeadline))):
					t.Fatalf("step %d: deadline %s (open %v); want %s", i, d.Sub(start), open, s.wantDeadline)
				}
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "ok", opts: Options{IdleDuration: time.Second, MaxDuration: 10 * time.Second}},
		{name: "equal", opts: Options{IdleDuration: time.Second, MaxDuration: time.Second}},
		{name: "zero idle", opts: Options{MaxDuration: time.Second}, wantErr: "idle duration must be positive, got 0s"},
		{name: "negative max", opts: Options{IdleDuration: time.Second, MaxDuration: -time.Second}, wantErr: "max duration must be positive, got -1s"},
		{name: "idle above max", opts: Options{IdleDuration: 2 * time.Second, MaxDuration: time.Second}, wantErr: "idle duration 2s is longer than max duration 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("New() = %v; want %q", err, tt.wantErr)
			}
		})
	}
}

func TestAddRejectsPodWithoutUID(t *testing.T) {
	b, _ := New(Options{IdleDuration: time.Second, MaxDuration: time.Second})
	if err := b.Add(messages.ObjectRef{Namespace: "ns", Name: "p"}); err == nil || !strings.Contains(err.Error(), "pod ns/p has no UID") {
		t.Fatalf("Add() = %v; want a missing-UID error", err)
	}
	if b.Len() != 0 {
		t.Fatalf("Len() = %d after a rejected Add; want 0", b.Len())
	}
}

func TestHas(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	b, _ := New(Options{IdleDuration: time.Second, MaxDuration: time.Second, Clock: clk})
	if err := b.Add(pod("a", "1")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		step func()
		uid  string
		want bool
	}{
		{step: func() {}, uid: "uid-a", want: true},
		{step: func() {}, uid: "uid-b", want: false},
		{step: func() { clk.Step(time.Second); b.Flush() }, uid: "uid-a", want: false},
	} {
		tt.step()
		if got := b.Has(tt.uid); got != tt.want {
			t.Errorf("Has(%s) = %v; want %v", tt.uid, got, tt.want)
		}
	}
}

// TestRun drives the loop with the fake clock: the window must be emitted
// when, and only when, the clock reaches its deadline.
func TestRun(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	b, err := New(Options{IdleDuration: time.Second, MaxDuration: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	emitted := make(chan []messages.ObjectRef, 4)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, func(p []messages.ObjectRef) { emitted <- p }) }()

	if err := b.Add(pod("a", "1")); err != nil {
		t.Fatal(err)
	}
	waitForTimer(t, clk)
	clk.Step(999 * time.Millisecond)
	select {
	case p := <-emitted:
		t.Fatalf("emitted %v before the idle deadline", p)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	select {
	case p := <-emitted:
		if want := []messages.ObjectRef{pod("a", "1")}; !reflect.DeepEqual(p, want) {
			t.Fatalf("emitted %v; want %v", p, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing emitted at the idle deadline")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run() = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if err := b.Run(context.Background(), nil); err == nil {
		t.Fatal("Run(nil emit) = nil; want error")
	}
}

// waitForTimer waits until Run has armed its timer on the fake clock, so a
// Step is not lost before the loop is waiting.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run never armed a timer")
		}
		time.Sleep(time.Millisecond)
	}
}
