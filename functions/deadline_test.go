package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

func TestPassTimeout(t *testing.T) {
	noFile := func(string) ([]byte, error) { return nil, errors.New("no host.json") }
	hostJSON := func(body string) func(string) ([]byte, error) {
		return func(string) ([]byte, error) { return []byte(body), nil }
	}
	cases := []struct {
		name     string
		setting  string
		readFile func(string) ([]byte, error)
		want     time.Duration
	}{
		{"host.json", "", hostJSON(`{"functionTimeout": "00:10:00"}`), 10*time.Minute - passMargin},
		{"app setting over host.json", "01:00:00", hostJSON(`{"functionTimeout": "00:10:00"}`), time.Hour - passMargin},
		{"days", "1.00:00:00", noFile, 24*time.Hour - passMargin},
		{"short: half", "00:00:40", noFile, 20 * time.Second},
		{"unbounded", "-1", noFile, 0},
		{"none: Flex's default", "", noFile, defaultFunctionTimeout - passMargin},
		{"unreadable: Flex's default", "ten minutes", noFile, defaultFunctionTimeout - passMargin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(name string) string {
				if name == functionTimeoutSetting {
					return tc.setting
				}
				return ""
			}
			if got := passTimeoutFrom(getenv, tc.readFile); got != tc.want {
				t.Errorf("pass timeout = %s, want %s", got, tc.want)
			}
		})
	}
}

// A pass that runs out of its invocation's time (here 50 ms) gets a
// context that ends, returns the typed error, and the adapter says so in
// the log.
func TestAdapterOutOfTime(t *testing.T) {
	saved := passTimeout
	passTimeout = func() time.Duration { return 50 * time.Millisecond }
	t.Cleanup(func() { passTimeout = saved })
	fn := function{name: "Provision", decode: decodeEvent, routes: map[string]route{
		"com.example.slow": {handle: func(ctx context.Context, _ *call) (triggers.Outcome, error) {
			started := time.Now()
			<-ctx.Done() // a solve longer than the invocation's time
			return triggers.Outcome{}, snapshot.CheckTime(ctx, "solve", started)
		}},
	}}
	var logged bytes.Buffer
	err := adapt(fn, testDeps{})(context.Background(), invocation(t, event(t, "1", "com.example.slow", map[string]string{})), customhandler.NewLogger(&logged, ""))
	var outOfTime *snapshot.OutOfTimeError
	if !errors.As(err, &outOfTime) || !errors.Is(err, context.DeadlineExceeded) || outOfTime.Phase != "solve" {
		t.Fatalf("error %v; want an OutOfTimeError in the solve wrapping context.DeadlineExceeded", err)
	}
	if !strings.Contains(logged.String(), "out of invocation time in the solve") {
		t.Errorf("log %q does not say the pass ran out of time", logged.String())
	}
}
