package triggers

import (
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	base := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		now  time.Time
		d    time.Duration
		want time.Time
	}{
		{"on a boundary", base, 2 * time.Second, base.Add(2 * time.Second)},
		{"just after a boundary (invocation latency)", base.Add(150 * time.Millisecond), 2 * time.Second, base.Add(2 * time.Second)},
		{"mid-period", base.Add(time.Second), 2 * time.Second, base.Add(2 * time.Second)},
		{"late in the period comes early, never late", base.Add(1900 * time.Millisecond), 2 * time.Second, base.Add(2 * time.Second)},
		{"period longer than a second", base.Add(61 * time.Second), time.Minute, base.Add(2 * time.Minute)},
		{"zero delay is now", base.Add(123 * time.Millisecond), 0, base.Add(123 * time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Due(tc.now, tc.d)
			if !got.Equal(tc.want) {
				t.Fatalf("Due(%s, %s) = %s; want %s", tc.now.Format("15:04:05.000"), tc.d, got.Format("15:04:05.000"), tc.want.Format("15:04:05.000"))
			}
			if got.Sub(tc.now) > tc.d || (tc.d > 0 && !got.After(tc.now)) {
				t.Fatalf("Due(%s, %s) = %s: not in (now, now+d]", tc.now.Format("15:04:05.000"), tc.d, got.Format("15:04:05.000"))
			}
		})
	}
}

// Chains started at any offsets merge: once each has hopped a couple of
// times (every invocation runs a little after its message is due), all of
// them have the same next MessageId, which duplicate detection keeps once.
func TestRetryChainsConverge(t *testing.T) {
	const d = 2 * time.Second
	base := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	horizon := base.Add(5 * d)
	for _, latency := range []time.Duration{0, 130 * time.Millisecond, 900 * time.Millisecond} {
		next := map[string]bool{}
		for start := time.Duration(0); start < 2*d; start += 97 * time.Millisecond {
			now := base.Add(start)
			at := Due(now, d)
			for !at.After(horizon) {
				now = at.Add(latency)
				at = Due(now, d)
			}
			next[TerminateRetry("c", "nc", "u", now, d).ID()] = true
		}
		if len(next) != 1 {
			t.Errorf("invocation latency %s: chains started within %s of each other are still %d chains: %v", latency, 2*d, len(next), next)
		}
	}
}

// Every ask of one slot is one message; the next slot is another.
func TestDisruptionSlotID(t *testing.T) {
	const slot = 5 * time.Second
	base := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	first := DisruptionSlot("c", "pods-gone", base.Add(100*time.Millisecond), slot)
	for _, off := range []time.Duration{0, time.Second, 4900 * time.Millisecond} {
		if got := DisruptionSlot("c", "pods-gone", base.Add(off), slot).ID(); got != first.ID() {
			t.Errorf("ask at +%s: id %s; want the slot's %s", off, got, first.ID())
		}
	}
	if got := DisruptionSlot("c", "pods-gone", base.Add(slot), slot).ID(); got == first.ID() {
		t.Errorf("ask in the next slot reused id %s", got)
	}
	if got := DisruptionSlot("c", "spec-changed", base, slot).ID(); got == first.ID() {
		t.Errorf("another cause reused id %s", got)
	}
	// A pass the Disruption controller schedules for the slot's end is
	// the same message as the slot's asks.
	if got := DisruptionPass("c", "pods-gone", Due(base, slot)).ID(); got != first.ID() {
		t.Errorf("pass scheduled at the slot's end has id %s; want the slot's %s", got, first.ID())
	}
	m, err := first.Message(Source)
	if err != nil {
		t.Fatal(err)
	}
	if m.SessionID != "c" || !m.ScheduledEnqueueTime.Equal(base.Add(slot)) {
		t.Errorf("message session %q at %s; want session c at %s", m.SessionID, m.ScheduledEnqueueTime, base.Add(slot))
	}
}
