package localbus

import (
	"math/rand"
	"time"
)

// ChaosOptions make the bus misbehave within what Service Bus allows, so
// handlers prove they are idempotent and order-independent.
type ChaosOptions struct {
	// Seed makes a run reproducible.
	Seed int64
	// DuplicateRate is the probability that a completed message is
	// delivered again (a lost settlement: at-least-once delivery).
	DuplicateRate float64
	// ReorderRate is the probability that a delivery takes a random ready
	// message instead of the oldest. Messages of one session keep their
	// order, as Service Bus guarantees; only sessions and non-session
	// messages are interleaved.
	ReorderRate float64
}

type chaosState struct {
	opts ChaosOptions
	rng  *rand.Rand
}

// SetChaos turns chaos on (nil: off) for every queue.
func (b *Bus) SetChaos(opts *ChaosOptions) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if opts == nil {
		b.chaos = nil
		return
	}
	b.chaos = &chaosState{opts: *opts, rng: rand.New(rand.NewSource(opts.Seed))}
}

func (c *chaosState) duplicate() bool {
	return c.opts.DuplicateRate > 0 && c.rng.Float64() < c.opts.DuplicateRate
}

// reorder returns a random deliverable message, or nil to keep the order.
func (c *chaosState) reorder(q *queue, now time.Time) *entry {
	if c.opts.ReorderRate <= 0 || c.rng.Float64() >= c.opts.ReorderRate {
		return nil
	}
	var ready []*entry
	busy := map[string]bool{}
	for _, queued := range q.active {
		if q.opts.RequiresSession {
			if busy[queued.msg.SessionID] {
				continue
			}
			busy[queued.msg.SessionID] = true // only a session's first message may go
		}
		if queued.lockToken == "" && !now.Before(queued.availableAt) {
			ready = append(ready, queued)
		}
	}
	if len(ready) < 2 {
		return nil
	}
	return ready[c.rng.Intn(len(ready))]
}
