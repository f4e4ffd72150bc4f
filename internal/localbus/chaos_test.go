package localbus

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// drainOrder receives and completes every message of queue, one at a time,
// and returns the IDs in delivery order (session/ID for session queues).
func drainOrder(t *testing.T, b *Bus, queue string, n int) []delivered {
	t.Helper()
	var got []delivered
	for range n {
		d := receive(t, b, queue)
		got = append(got, delivered{session: d.Message.SessionID, id: d.Message.ID})
		if err := b.Complete(d); err != nil {
			t.Fatal(err)
		}
	}
	nothing(t, b, queue)
	return got
}

// delivered is one delivery: its session and message ID.
type delivered struct{ session, id string }

func TestChaosReorder(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		sessions []string // one entry per message, round-robin; "" for a non-session queue
		rate     float64
		// reordered: the delivery order differs from the publish order.
		reordered bool
	}{
		{name: "non-session queue: messages are interleaved", sessions: []string{""}, rate: 1, reordered: true},
		{name: "non-session queue without reordering keeps FIFO", sessions: []string{""}, rate: 0},
		{name: "session queue: sessions are interleaved, each in order", sessions: []string{"s1", "s2", "s3"}, rate: 1, reordered: true},
		{name: "a single session is never reordered", sessions: []string{"only"}, rate: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 12
			run := func(seed int64) []delivered {
				b, _ := newBareBus(t, Options{})
				sessionQueue := c.sessions[0] != ""
				if err := b.CreateQueue("q", QueueOptions{RequiresSession: sessionQueue, RequiresDuplicateDetection: true}); err != nil {
					t.Fatal(err)
				}
				b.SetChaos(&ChaosOptions{Seed: seed, ReorderRate: c.rate})
				for i := range n {
					if err := b.Publish(ctx, "q", msg(fmt.Sprintf("m%02d", i), c.sessions[i%len(c.sessions)])); err != nil {
						t.Fatal(err)
					}
				}
				got := drainOrder(t, b, "q", n)
				s := b.Stats()["q"]
				if c.reordered != (s.Reordered > 0) {
					t.Errorf("seed %d: %d deliveries reordered; want reordering=%t", seed, s.Reordered, c.reordered)
				}
				if s.Delivered != n || s.Redelivered != 0 {
					t.Errorf("seed %d: stats %+v; want each message delivered once", seed, s)
				}
				return got
			}
			got := run(7)
			var published []delivered
			for i := range n {
				published = append(published, delivered{session: c.sessions[i%len(c.sessions)], id: fmt.Sprintf("m%02d", i)})
			}
			if c.reordered == slices.Equal(got, published) {
				t.Errorf("delivery order %v; want reordered=%t against publish order", got, c.reordered)
			}
			// Whatever happens across sessions, one session's messages
			// come in publish order (the IDs sort in publish order).
			bySession := map[string][]string{}
			for _, m := range got {
				bySession[m.session] = append(bySession[m.session], m.id)
			}
			for s, ids := range bySession {
				if s != "" && !slices.IsSorted(ids) {
					t.Errorf("session %s delivered out of order: %v", s, ids)
				}
			}
			// Seeded: the same seed gives the same run.
			if again := run(7); !slices.Equal(got, again) {
				t.Errorf("same seed, different order:\n%v\n%v", got, again)
			}
		})
	}
}

// TestChaosSessionLock: with reordering on, a session whose message is
// locked by a receiver delivers nothing else until it is settled.
func TestChaosSessionLock(t *testing.T) {
	b, _ := newBareBus(t, Options{})
	ctx := context.Background()
	if err := b.CreateQueue("q", QueueOptions{RequiresSession: true, RequiresDuplicateDetection: true}); err != nil {
		t.Fatal(err)
	}
	b.SetChaos(&ChaosOptions{Seed: 1, ReorderRate: 1})
	for i := range 4 {
		if err := b.Publish(ctx, "q", msg(fmt.Sprintf("m%d", i), "s")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		d := receive(t, b, "q")
		if want := fmt.Sprintf("m%d", i); d.Message.ID != want {
			t.Fatalf("delivery %d = %s; want %s", i, d.Message.ID, want)
		}
		nothing(t, b, "q") // the session is locked
		if err := b.Complete(d); err != nil {
			t.Fatal(err)
		}
	}
}

func TestChaosDuplicates(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		session string
		rate    float64
		again   bool
	}{
		{name: "a completed message comes again after the retry delay", rate: 1, again: true},
		{name: "also in a session queue", session: "s", rate: 1, again: true},
		{name: "no duplicates without chaos", rate: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, clk := newBareBus(t, Options{RetryDelay: 5 * time.Second})
			if err := b.CreateQueue("q", QueueOptions{RequiresSession: c.session != "", RequiresDuplicateDetection: true}); err != nil {
				t.Fatal(err)
			}
			b.SetChaos(&ChaosOptions{Seed: 3, DuplicateRate: c.rate})
			if err := b.Publish(ctx, "q", msg("a", c.session)); err != nil {
				t.Fatal(err)
			}
			d := receive(t, b, "q")
			if err := b.Complete(d); err != nil {
				t.Fatal(err)
			}
			b.SetChaos(nil)    // one duplicate is enough; otherwise rate 1 loops forever
			nothing(t, b, "q") // held for the retry delay, on the bus's clock
			clk.Step(5 * time.Second)
			if !c.again {
				nothing(t, b, "q")
				return
			}
			d = receive(t, b, "q")
			if d.Message.ID != "a" || d.DeliveryCount != 2 {
				t.Fatalf("redelivery = %q, delivery %d; want a, delivery 2", d.Message.ID, d.DeliveryCount)
			}
			if err := b.Complete(d); err != nil {
				t.Fatal(err)
			}
			clk.Step(5 * time.Second)
			nothing(t, b, "q")
			if s := b.Stats()["q"]; s.Redelivered != 1 || s.Completed != 2 {
				t.Errorf("stats = %+v; want 1 redelivered, 2 completed", s)
			}
		})
	}
}
