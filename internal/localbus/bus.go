// Package localbus is an in-process stand-in for Azure Service Bus queues,
// with the semantics karpfunc relies on: duplicate detection on MessageId,
// scheduled delivery, sessions (one message of a session in flight at a time,
// in order), peek-lock with at-least-once redelivery, and dead-lettering after
// MaxDeliveryCount. The local Functions host receives from it; publishers use
// Publish in process or the HTTP API (Handler) over loopback.
//
// Locks. A receiver gets a message under a lock. Like the Functions host, which
// renews the lock automatically up to maxAutoLockRenewalDuration, the bus
// holds a lock for max(LockDuration, MaxAutoLockRenewal). When it runs out the
// message is released as if abandoned (and redelivered while the first
// receiver may still be working, as in Service Bus); settling with the stale
// lock then fails with ErrLockLost.
package localbus

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// Dead-letter reasons, as Service Bus writes them.
const (
	ReasonMaxDeliveryCountExceeded = "MaxDeliveryCountExceeded"
)

// maxDeliveryDescription is the DeadLetterErrorDescription Service Bus
// writes with ReasonMaxDeliveryCountExceeded. It never carries the
// handler's error: that is in the handler's logs (and, for messages about
// an object, in a Kubernetes event on it), where Azure users look.
func maxDeliveryDescription(n int) string {
	return fmt.Sprintf("Message could not be consumed after %d delivery attempts.", n)
}

// Service Bus limits checked at publish time.
const (
	maxIDLength        = 128
	maxQueueNameLength = 260
)

// Options configures a Bus. Zero values take the Service Bus defaults.
type Options struct {
	// Clock is the time source (default: the real clock).
	Clock clock.Clock
	// MaxDeliveryCount is how many deliveries a message gets before it is
	// dead-lettered (default 10).
	MaxDeliveryCount int
	// RetryDelay is how long an abandoned message waits before it is
	// delivered again (default 1 s; Service Bus redelivers at once, a short
	// delay keeps a failing handler from spinning).
	RetryDelay time.Duration
	// LockDuration is the peek-lock duration (default 1 min).
	LockDuration time.Duration
	// MaxAutoLockRenewal is how long a receiver keeps renewing a lock
	// (default 5 min, host.json maxAutoLockRenewalDuration). The effective
	// lock is the longer of the two.
	MaxAutoLockRenewal time.Duration
	// DuplicateDetectionWindow is how long a MessageId is remembered
	// (default 10 min).
	DuplicateDetectionWindow time.Duration
	// MaxMessageBytes bounds a message body (default 256 KiB, Standard tier).
	MaxMessageBytes int
	// Rights are the namespace's role assignments, by queue entity name
	// (bus.Named(bus.QueueRights, names)): what each identity may do on
	// which queue (see Client). Nil turns authorization off, as a namespace
	// reached with a SAS key that has every claim.
	Rights []bus.Grant
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxDeliveryCount <= 0 {
		o.MaxDeliveryCount = 10
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = time.Second
	}
	if o.LockDuration <= 0 {
		o.LockDuration = time.Minute
	}
	if o.MaxAutoLockRenewal <= 0 {
		o.MaxAutoLockRenewal = 5 * time.Minute
	}
	if o.DuplicateDetectionWindow <= 0 {
		o.DuplicateDetectionWindow = 10 * time.Minute
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 256 << 10
	}
	return o
}

// QueueOptions are a queue's creation-time properties, named as in the
// Service Bus queue resource.
type QueueOptions struct {
	// RequiresSession makes every message need a SessionID and serializes
	// delivery per session.
	RequiresSession bool
	// RequiresDuplicateDetection drops a message whose MessageId the queue
	// saw within its duplicate detection window. Off, as in Service Bus,
	// every message is enqueued.
	RequiresDuplicateDetection bool
	// DuplicateDetectionHistoryTimeWindow is the queue's window; zero
	// means the bus's DuplicateDetectionWindow.
	DuplicateDetectionHistoryTimeWindow time.Duration
}

// Errors.
var (
	// ErrClosed is returned once Close has been called.
	ErrClosed = errors.New("localbus: closed")
	// ErrLockLost means the lock expired (or the message was settled)
	// before this settlement.
	ErrLockLost = errors.New("localbus: message lock lost")
)

// CodeMessagingEntityNotFound is Service Bus's error for an entity that
// does not exist.
const CodeMessagingEntityNotFound = "MessagingEntityNotFound"

// CodeUnauthorizedAccess is the code azservicebus reports for an operation
// the identity has no claim for (azservicebus.CodeUnauthorizedAccess).
const CodeUnauthorizedAccess = "unauthorized"

// QueueNotFoundError is returned for operations on a queue nothing created:
// Service Bus's MessagingEntityNotFound. Queues are created by deployment
// (the local host creates its functions' queues), never by a publish.
type QueueNotFoundError struct{ Queue string }

func (e *QueueNotFoundError) Error() string {
	return fmt.Sprintf("%s: queue %q does not exist: the messaging entity '%s' could not be found; create the queue or fix the queue name setting",
		CodeMessagingEntityNotFound, e.Queue, e.Queue)
}

// InvalidMessageError is a publish the real service would reject.
type InvalidMessageError struct {
	Queue  string
	Index  int
	Reason string
}

func (e *InvalidMessageError) Error() string {
	return fmt.Sprintf("queue %q: message %d: %s", e.Queue, e.Index, e.Reason)
}

// Delivery is a message received under a lock.
type Delivery struct {
	Queue          string
	Message        bus.Message
	LockToken      string
	DeliveryCount  int
	SequenceNumber int64
	EnqueuedTime   time.Time
	LockedUntil    time.Time
}

// DeadLetter is a dead-lettered message with Service Bus's reason properties.
type DeadLetter struct {
	bus.Message
	DeadLetterReason           string    `json:"deadLetterReason"`
	DeadLetterErrorDescription string    `json:"deadLetterErrorDescription"`
	DeliveryCount              int       `json:"deliveryCount"`
	SequenceNumber             int64     `json:"sequenceNumber"`
	EnqueuedTime               time.Time `json:"enqueuedTime"`
	DeadLetteredTime           time.Time `json:"deadLetteredTime"`
}

// QueueStats counts one queue's messages.
type QueueStats struct {
	RequiresSession bool `json:"requiresSession"`
	// Active messages are in the queue (waiting, held for retry, or locked).
	Active int `json:"active"`
	// InFlight messages are locked by a receiver.
	InFlight     int `json:"inFlight"`
	Scheduled    int `json:"scheduled"`
	DeadLettered int `json:"deadlettered"`
	// Delivered counts deliveries, redeliveries included.
	Delivered  int64 `json:"delivered"`
	Completed  int64 `json:"completed"`
	Abandoned  int64 `json:"abandoned"`
	Duplicates int64 `json:"duplicates"`
	// Redelivered counts completed messages delivered again by Chaos.
	Redelivered int64 `json:"redelivered"`
	// Reordered counts deliveries Chaos took out of order.
	Reordered int64 `json:"reordered"`
}

type entry struct {
	msg           bus.Message
	seq           int64
	enqueued      time.Time
	availableAt   time.Time // held for retry until then
	deliveryCount int
	lockToken     string
	lockedUntil   time.Time
	lastFailure   string
}

type queue struct {
	name      string
	opts      QueueOptions
	nextSeq   int64
	scheduled []*entry // by ScheduledEnqueueTime, then publish order
	active    []*entry // by sequence number
	dead      []DeadLetter
	seen      map[string]time.Time
	stats     QueueStats
}

// Bus is a set of queues.
type Bus struct {
	opts Options

	mu      sync.Mutex
	queues  map[string]*queue
	changed chan struct{} // closed and replaced on every change
	closed  bool
	chaos   *chaosState
	// credentials maps the bearer credentials Credential minted to their
	// identities.
	credentials map[string]bus.Identity
}

// New returns an empty Bus.
func New(opts Options) *Bus {
	return &Bus{opts: opts.withDefaults(), queues: map[string]*queue{}, changed: make(chan struct{}), credentials: map[string]bus.Identity{}}
}

var queueNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._\-/]*[A-Za-z0-9_])?$`)

func validQueueName(name string) error {
	if len(name) > maxQueueNameLength || !queueNameRE.MatchString(name) {
		return fmt.Errorf("invalid queue name %q: want letters, digits, '.', '-', '_', '/', starting with a letter or digit, at most %d characters", name, maxQueueNameLength)
	}
	return nil
}

// CreateQueue creates queue with opts, or checks that an existing queue has
// them: a queue's session mode is fixed at creation, as in Service Bus.
func (b *Bus) CreateQueue(name string, opts QueueOptions) error {
	if err := validQueueName(name); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if existing, ok := b.queues[name]; ok {
		if existing.opts != opts {
			return fmt.Errorf("queue %q already exists with requiresSession=%t; cannot use it with requiresSession=%t",
				name, existing.opts.RequiresSession, opts.RequiresSession)
		}
		return nil
	}
	b.queues[name] = newQueue(name, opts)
	return nil
}

func newQueue(name string, opts QueueOptions) *queue {
	return &queue{name: name, opts: opts, seen: map[string]time.Time{}, stats: QueueStats{RequiresSession: opts.RequiresSession}}
}

// Publish sends msgs to queue, which must exist (CreateQueue): as in Service
// Bus, a publish to an unknown queue fails with MessagingEntityNotFound. All
// messages are validated before any is enqueued. On a queue with duplicate
// detection, a message whose ID was seen within the window is accepted and
// dropped, as Service Bus does.
func (b *Bus) Publish(ctx context.Context, queueName string, msgs ...bus.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validQueueName(queueName); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	target := b.queues[queueName]
	if target == nil {
		return &QueueNotFoundError{Queue: queueName}
	}
	requiresSession := target.opts.RequiresSession
	copies := make([]bus.Message, len(msgs))
	for i, msg := range msgs {
		if err := b.validate(msg, requiresSession); err != nil {
			return &InvalidMessageError{Queue: queueName, Index: i, Reason: err.Error()}
		}
		msg.Body = slices.Clone(msg.Body)
		msg.ApplicationProperties = maps.Clone(msg.ApplicationProperties)
		if msg.ID == "" {
			msg.ID = NewGUID() // the SDK's behaviour when MessageId is unset
		}
		copies[i] = msg
	}
	now := b.opts.Clock.Now()
	for id, seenAt := range target.seen {
		if now.Sub(seenAt) >= b.dupWindow(target) {
			delete(target.seen, id)
		}
	}
	for _, msg := range copies {
		if target.opts.RequiresDuplicateDetection {
			if _, dup := target.seen[msg.ID]; dup {
				target.stats.Duplicates++
				continue
			}
			target.seen[msg.ID] = now
		}
		queued := &entry{msg: msg}
		if msg.ScheduledEnqueueTime.After(now) {
			slot, _ := slices.BinarySearchFunc(target.scheduled, msg.ScheduledEnqueueTime, func(e *entry, t time.Time) int {
				if e.msg.ScheduledEnqueueTime.After(t) {
					return 1
				}
				return -1 // equal times keep publish order
			})
			target.scheduled = slices.Insert(target.scheduled, slot, queued)
			continue
		}
		target.enqueue(queued, now)
	}
	b.broadcast()
	return nil
}

func (b *Bus) validate(m bus.Message, requiresSession bool) error {
	switch {
	case len(m.ID) > maxIDLength:
		return fmt.Errorf("id is %d characters; the limit is %d", len(m.ID), maxIDLength)
	case len(m.SessionID) > maxIDLength:
		return fmt.Errorf("sessionId is %d characters; the limit is %d", len(m.SessionID), maxIDLength)
	case requiresSession && m.SessionID == "":
		return errors.New("the queue requires sessions and the message has no sessionId")
	case len(m.Body) > b.opts.MaxMessageBytes:
		return fmt.Errorf("body is %d bytes; the limit is %d", len(m.Body), b.opts.MaxMessageBytes)
	}
	return nil
}

// dupWindow is how long q remembers a MessageId.
func (b *Bus) dupWindow(q *queue) time.Duration {
	if window := q.opts.DuplicateDetectionHistoryTimeWindow; window > 0 {
		return window
	}
	return b.opts.DuplicateDetectionWindow
}

func (q *queue) enqueue(e *entry, now time.Time) {
	q.nextSeq++
	e.seq = q.nextSeq
	e.enqueued = now
	q.active = append(q.active, e)
}

// Close stops the bus: receivers return ErrClosed. Messages are discarded.
func (b *Bus) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.broadcast()
	return nil
}

func (b *Bus) broadcast() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// tick moves due scheduled messages into the queue and releases expired
// locks, announcing any change. Callers hold b.mu.
func (b *Bus) tick(q *queue, now time.Time) {
	changed := false
	defer func() {
		if changed {
			b.broadcast()
		}
	}()
	due := 0
	for due < len(q.scheduled) && !q.scheduled[due].msg.ScheduledEnqueueTime.After(now) {
		q.enqueue(q.scheduled[due], now)
		due++
		changed = true
	}
	q.scheduled = q.scheduled[due:]
	for _, queued := range slices.Clone(q.active) {
		if queued.lockToken != "" && !now.Before(queued.lockedUntil) {
			b.release(q, queued, queued.lockedUntil, fmt.Sprintf("lock expired after %s without the message being settled", b.lockFor()))
			changed = true
		}
	}
}

func (b *Bus) lockFor() time.Duration { return max(b.opts.LockDuration, b.opts.MaxAutoLockRenewal) }

// release returns a locked message to the queue after a failed delivery, or
// dead-letters it when it has had all its deliveries.
func (b *Bus) release(q *queue, e *entry, now time.Time, description string) {
	e.lockToken = ""
	e.lockedUntil = time.Time{}
	e.lastFailure = description
	q.stats.Abandoned++
	if e.deliveryCount >= b.opts.MaxDeliveryCount {
		q.active = slices.DeleteFunc(q.active, func(x *entry) bool { return x == e })
		q.dead = append(q.dead, DeadLetter{Message: e.msg, DeadLetterReason: ReasonMaxDeliveryCountExceeded,
			DeadLetterErrorDescription: maxDeliveryDescription(e.deliveryCount), DeliveryCount: e.deliveryCount, SequenceNumber: e.seq,
			EnqueuedTime: e.enqueued, DeadLetteredTime: now})
		return
	}
	e.availableAt = now.Add(b.opts.RetryDelay)
}

// pick returns the next deliverable message, or nil. In a session queue a
// session is busy while any of its messages is locked, and a message held for
// retry blocks the later messages of its session, so order is kept.
func (q *queue) pick(now time.Time) *entry {
	var blocked map[string]bool
	if q.opts.RequiresSession {
		blocked = map[string]bool{}
	}
	for _, queued := range q.active {
		if blocked != nil && blocked[queued.msg.SessionID] {
			continue
		}
		if queued.lockToken == "" && !now.Before(queued.availableAt) {
			return queued
		}
		if blocked != nil {
			blocked[queued.msg.SessionID] = true
		}
	}
	return nil
}

// nextEvent is the earliest time after now something in q becomes due
// (zero: none). Times already past are left out: they are either handled or
// waiting for a change (a session's lock), which a broadcast announces.
func (q *queue) nextEvent(now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if len(q.scheduled) > 0 {
		consider(q.scheduled[0].msg.ScheduledEnqueueTime)
	}
	for _, queued := range q.active {
		if queued.lockToken != "" {
			consider(queued.lockedUntil)
		} else {
			consider(queued.availableAt)
		}
	}
	return next
}

// Receive waits for the next message of queue and locks it. The queue must
// exist (CreateQueue), as a Service Bus receiver's entity must.
func (b *Bus) Receive(ctx context.Context, queueName string) (*Delivery, error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		source, ok := b.queues[queueName]
		if !ok {
			b.mu.Unlock()
			return nil, &QueueNotFoundError{Queue: queueName}
		}
		now := b.opts.Clock.Now()
		b.tick(source, now)
		picked := source.pick(now)
		if picked != nil && b.chaos != nil {
			if reordered := b.chaos.reorder(source, now); reordered != nil && reordered != picked {
				picked = reordered
				source.stats.Reordered++
			}
		}
		if picked != nil {
			picked.deliveryCount++
			picked.lockToken = NewGUID()
			picked.lockedUntil = now.Add(b.lockFor())
			source.stats.Delivered++
			delivery := &Delivery{Queue: source.name, Message: picked.msg, LockToken: picked.lockToken, DeliveryCount: picked.deliveryCount,
				SequenceNumber: picked.seq, EnqueuedTime: picked.enqueued, LockedUntil: picked.lockedUntil}
			delivery.Message.Body = slices.Clone(picked.msg.Body)
			b.mu.Unlock()
			return delivery, nil
		}
		changed := b.changed
		next := source.nextEvent(now)
		b.mu.Unlock()
		if err := b.wait(ctx, changed, next); err != nil {
			return nil, err
		}
	}
}

func (b *Bus) wait(ctx context.Context, changed <-chan struct{}, next time.Time) error {
	var timeout <-chan time.Time
	if !next.IsZero() {
		timer := b.opts.Clock.NewTimer(max(next.Sub(b.opts.Clock.Now()), 0))
		defer timer.Stop()
		timeout = timer.C()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timeout:
	}
	return nil
}

func (b *Bus) locked(d *Delivery) (*queue, *entry, error) {
	owner, ok := b.queues[d.Queue]
	if !ok {
		return nil, nil, &QueueNotFoundError{Queue: d.Queue}
	}
	b.tick(owner, b.opts.Clock.Now())
	for _, queued := range owner.active {
		if queued.lockToken != "" && queued.lockToken == d.LockToken {
			return owner, queued, nil
		}
	}
	return owner, nil, fmt.Errorf("%w: message %q on queue %q (lock %s)", ErrLockLost, d.Message.ID, d.Queue, d.LockToken)
}

// Complete removes a delivered message from its queue.
func (b *Bus) Complete(d *Delivery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	owner, held, err := b.locked(d)
	if err != nil {
		return err
	}
	owner.active = slices.DeleteFunc(owner.active, func(x *entry) bool { return x == held })
	owner.stats.Completed++
	if b.chaos != nil && b.chaos.duplicate() {
		// At-least-once: the settlement was "lost" and the message comes
		// again, with its delivery count, like after a lock expiry.
		dup := &entry{msg: held.msg, deliveryCount: held.deliveryCount, availableAt: b.opts.Clock.Now().Add(b.opts.RetryDelay)}
		owner.enqueue(dup, b.opts.Clock.Now())
		owner.stats.Redelivered++
	}
	b.broadcast()
	return nil
}

// Abandon releases a delivered message after a failed delivery: it is
// delivered again after RetryDelay, or dead-lettered with Service Bus's
// reason and description (MaxDeliveryCountExceeded, "Message could not be
// consumed after N delivery attempts.") when it has had MaxDeliveryCount
// deliveries. description, the failure, is not written into the dead
// letter, as Service Bus would not: the caller logs it where Azure users
// look (the handler's logs).
func (b *Bus) Abandon(d *Delivery, description string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	owner, held, err := b.locked(d)
	if err != nil {
		return err
	}
	b.release(owner, held, b.opts.Clock.Now(), description)
	b.broadcast()
	return nil
}

// DeadLetters returns queue's dead-lettered messages, oldest first.
func (b *Bus) DeadLetters(queueName string) ([]DeadLetter, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	source, ok := b.queues[queueName]
	if !ok {
		return nil, &QueueNotFoundError{Queue: queueName}
	}
	b.tick(source, b.opts.Clock.Now())
	return slices.Clone(source.dead), nil
}

// Stats returns every queue's counters.
func (b *Bus) Stats() map[string]QueueStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.opts.Clock.Now()
	out := make(map[string]QueueStats, len(b.queues))
	for name, named := range b.queues {
		b.tick(named, now)
		stats := named.stats
		stats.Active = len(named.active)
		stats.Scheduled = len(named.scheduled)
		stats.DeadLettered = len(named.dead)
		for _, queued := range named.active {
			if queued.lockToken != "" {
				stats.InFlight++
			}
		}
		out[name] = stats
	}
	return out
}

// Queues returns the queue names, sorted.
func (b *Bus) Queues() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.queues))
}

// idle reports whether no queue has an active message or a scheduled one
// due before horizon, and the earliest such scheduled time otherwise.
func (b *Bus) idle(horizon time.Time) (bool, time.Time) {
	now := b.opts.Clock.Now()
	idle := true
	next := time.Time{}
	for _, named := range b.queues {
		b.tick(named, now)
		if len(named.active) > 0 {
			idle = false
			if nextAt := named.nextEvent(now); !nextAt.IsZero() && (next.IsZero() || nextAt.Before(next)) {
				next = nextAt
			}
		}
		if len(named.scheduled) > 0 && named.scheduled[0].msg.ScheduledEnqueueTime.Before(horizon) {
			idle = false
			if dueAt := named.scheduled[0].msg.ScheduledEnqueueTime; next.IsZero() || dueAt.Before(next) {
				next = dueAt
			}
		}
	}
	return idle, next
}

// WaitIdle waits until every queue is empty and nothing is scheduled before
// horizon. Messages nobody receives keep the bus busy.
func (b *Bus) WaitIdle(ctx context.Context, horizon time.Time) error {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return ErrClosed
		}
		idle, next := b.idle(horizon)
		changed := b.changed
		b.mu.Unlock()
		if idle {
			return nil
		}
		if err := b.wait(ctx, changed, next); err != nil {
			return err
		}
	}
}

// Changed returns a channel closed at the next change of the bus's state.
func (b *Bus) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Idle reports whether WaitIdle(horizon) would return now.
func (b *Bus) Idle(horizon time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	idle, _ := b.idle(horizon)
	return idle
}

// NewGUID returns a random RFC 4122 version 4 GUID, the form of Service Bus
// lock tokens and the host's invocation ids.
func NewGUID() string {
	var guid [16]byte
	_, _ = rand.Read(guid[:])
	guid[6] = guid[6]&0x0f | 0x40
	guid[8] = guid[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", guid[0:4], guid[4:6], guid[6:8], guid[8:10], guid[10:16])
}
