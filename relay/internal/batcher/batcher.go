// Package batcher collects the pods kube-scheduler marked Unschedulable into
// windows, so one provision event carries a burst of pods (a Deployment
// scaled to 50 replicas is one decision, not 50).
//
// A window opens with the first pod, and closes IdleDuration after the last
// new pod arrived or MaxDuration after it opened, whichever comes first: the
// idle bound answers a burst quickly once it is over, the max bound keeps a
// steady trickle from postponing provisioning forever.
//
// The Batcher is a pure state machine over an injected clock (Add, Remove,
// Deadline, Flush); Run is the small loop that sleeps until the deadline.
package batcher

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

// Options configure a Batcher.
type Options struct {
	// IdleDuration closes the window this long after the last new pod.
	IdleDuration time.Duration
	// MaxDuration closes the window this long after it opened.
	MaxDuration time.Duration
	// Clock is injected so tests can step time; nil means the real clock.
	Clock clock.WithTicker
}

// Batcher holds the current window. It is safe for concurrent use: informer
// handlers call Add and Remove while Run flushes.
type Batcher struct {
	idle, max time.Duration
	clock     clock.WithTicker

	mu     sync.Mutex
	pods   map[string]messages.ObjectRef // by UID
	opened time.Time                     // when the first pod of the window arrived
	last   time.Time                     // when the latest new pod arrived
	wake   chan struct{}                 // tells Run the deadline may have moved
}

// New validates opts and returns an empty Batcher.
func New(opts Options) (*Batcher, error) {
	switch {
	case opts.IdleDuration <= 0:
		return nil, fmt.Errorf("batcher: idle duration must be positive, got %s", opts.IdleDuration)
	case opts.MaxDuration <= 0:
		return nil, fmt.Errorf("batcher: max duration must be positive, got %s", opts.MaxDuration)
	case opts.IdleDuration > opts.MaxDuration:
		return nil, fmt.Errorf("batcher: idle duration %s is longer than max duration %s", opts.IdleDuration, opts.MaxDuration)
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Batcher{idle: opts.IdleDuration, max: opts.MaxDuration, clock: clk,
		pods: map[string]messages.ObjectRef{}, wake: make(chan struct{}, 1)}, nil
}

// Add puts an unschedulable pod in the window, opening one if none is open.
// A pod already in the window only has its reference refreshed (its latest
// resourceVersion): it does not extend the window, or a pod whose status the
// scheduler keeps rewriting would hold the window open until MaxDuration.
func (b *Batcher) Add(pod messages.ObjectRef) error {
	if pod.UID == "" {
		return fmt.Errorf("batcher: pod %s/%s has no UID", pod.Namespace, pod.Name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, known := b.pods[pod.UID]
	b.pods[pod.UID] = pod
	if known {
		return nil
	}
	now := b.clock.Now()
	if len(b.pods) == 1 {
		b.opened = now
	}
	b.last = now
	b.signal()
	return nil
}

// Remove drops a pod that got scheduled or deleted before the window closed.
// Removing the last pod closes the window without an event.
func (b *Batcher) Remove(uid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.pods[uid]; !ok {
		return
	}
	delete(b.pods, uid)
	if len(b.pods) == 0 {
		b.opened = time.Time{}
		b.last = time.Time{}
	}
	b.signal()
}

// Has reports whether the pod with this UID is in the open window.
func (b *Batcher) Has(uid string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.pods[uid]
	return ok
}

// Len is the number of pods in the open window.
func (b *Batcher) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pods)
}

// Deadline is when the open window closes; false when no window is open.
func (b *Batcher) Deadline() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deadline()
}

func (b *Batcher) deadline() (time.Time, bool) {
	if len(b.pods) == 0 {
		return time.Time{}, false
	}
	idle := b.last.Add(b.idle)
	longest := b.opened.Add(b.max)
	if longest.Before(idle) {
		return longest, true
	}
	return idle, true
}

// Flush closes the window if its deadline has passed and returns its pods,
// sorted by namespace and name so equal windows give equal events. It returns
// nil while the window is still open or when there is none.
func (b *Batcher) Flush() []messages.ObjectRef {
	b.mu.Lock()
	defer b.mu.Unlock()
	deadline, ok := b.deadline()
	if !ok || b.clock.Now().Before(deadline) {
		return nil
	}
	out := make([]messages.ObjectRef, 0, len(b.pods))
	for _, pod := range b.pods {
		out = append(out, pod)
	}
	Sort(out)
	b.pods = map[string]messages.ObjectRef{}
	b.opened = time.Time{}
	b.last = time.Time{}
	return out
}

// Sort orders pod references by namespace, name, then UID.
func Sort(pods []messages.ObjectRef) {
	sort.Slice(pods, func(i, j int) bool {
		left := pods[i]
		right := pods[j]
		if left.Namespace != right.Namespace {
			return left.Namespace < right.Namespace
		}
		if left.Name != right.Name {
			return left.Name < right.Name
		}
		return left.UID < right.UID
	})
}

func (b *Batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default: // Run already has a pending wake-up
	}
}

// Run emits each closed window until ctx is done. emit is called from Run's
// goroutine, one window at a time. Pods still in an open window at shutdown
// are not emitted: the next relay lists them again and its resync re-emits.
func (b *Batcher) Run(ctx context.Context, emit func([]messages.ObjectRef)) error {
	if emit == nil {
		return errors.New("batcher: emit is nil")
	}
	for {
		var timer clock.Timer
		var fire <-chan time.Time
		if deadline, ok := b.Deadline(); ok {
			timer = b.clock.NewTimer(deadline.Sub(b.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-b.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if pods := b.Flush(); len(pods) > 0 {
			emit(pods)
		}
	}
}
