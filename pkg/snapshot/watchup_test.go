package snapshot

import (
	"errors"
	"testing"
	"time"
)

// TestProbeNeedsTheKindsWatch: a freshness probe proves a kind's view only
// while the kind's own watch is up; with none up (a relist under way, a
// reconnect), the pass waits up to CatchUp for one and, failing that,
// does not take the probe's word at all.
func TestProbeNeedsTheKindsWatch(t *testing.T) {
	cache := NewCache(nil, CacheOptions{CatchUp: 50 * time.Millisecond})
	t.Cleanup(cache.Close)
	pods := cache.kind("pods")
	if err := cache.probeWatched(t.Context(), pods, 10); !errors.Is(err, errNoWatch) {
		t.Errorf("probe with no watch up: %v, want errNoWatch", err)
	}
	if probes := cache.Stats().Probes; probes != 0 {
		t.Errorf("%d probes sent with no watch up; want none", probes)
	}
}

// TestWatchUp follows which watch a kind is consuming: a watch of a
// goroutine a relist replaced is never the kind's, an ended one no longer
// is, and a pass waiting for a watch gets the one that comes up.
func TestWatchUp(t *testing.T) {
	kind := &kindCache{advanced: make(chan struct{})}
	if stale := kind.watchStarted(kind.gen + 1); stale != 0 {
		t.Errorf("a watch of a replaced goroutine was numbered %d; want 0", stale)
	}
	first := kind.watchStarted(kind.gen)
	if first == 0 || !kind.stillWatching(first) {
		t.Fatalf("watch %d started, but the kind is not watching it", first)
	}
	kind.watchEnded(first)
	if kind.stillWatching(first) {
		t.Errorf("watch %d ended, but the kind still counts it", first)
	}
	came := make(chan uint64, 1)
	go func() { came <- kind.waitForWatch(t.Context(), 5*time.Second) }()
	time.Sleep(20 * time.Millisecond)
	second := kind.watchStarted(kind.gen)
	if got := <-came; got != second || second == first {
		t.Errorf("waiting for a watch got %d; want the one that came up, %d (not %d)", got, second, first)
	}
	kind.watchEnded(first) // a late end of the first does not end the second
	if !kind.stillWatching(second) {
		t.Errorf("ending watch %d ended watch %d", first, second)
	}
}

// waitUntil polls done for up to 10 s.
func waitUntil(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
