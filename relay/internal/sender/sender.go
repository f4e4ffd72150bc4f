// Package sender publishes the relay's messages without ever blocking an
// informer handler and without losing a message to a transient bus failure:
// messages wait in a work queue, keyed by queue and message ID, and a failed
// publish is retried with exponential backoff until it succeeds or the relay
// stops (and then the unsent ones are logged by ID, not dropped quietly).
//
// Keying by message ID also collapses repeats while a message is waiting: the
// relay's IDs are deterministic, so a repeat is the same event.
package sender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/util/workqueue"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/telemetry"
)

// Options configure a Sender.
type Options struct {
	// Publisher is the bus the messages go to.
	Publisher bus.Publisher
	// Logger receives retry and shutdown reports; nil means slog.Default().
	Logger *slog.Logger
	// BaseDelay and MaxDelay bound the per-message exponential backoff
	// (defaults 250ms and 1m).
	BaseDelay, MaxDelay time.Duration
	// AttemptTimeout bounds one Publish call (default 30s), so a hung
	// connection turns into a retry instead of a stuck worker.
	AttemptTimeout time.Duration
	// Workers is how many messages are in flight at once (default 2).
	Workers int
}

type key struct{ queue, id string }

// Sender is an asynchronous, retrying publisher.
type Sender struct {
	pub     bus.Publisher
	log     *slog.Logger
	timeout time.Duration
	workers int
	queue   workqueue.TypedRateLimitingInterface[key]

	mu      sync.Mutex
	pending map[key]*bus.Message
}

// New validates opts and returns a Sender; call Run to start publishing.
func New(opts Options) (*Sender, error) {
	if opts.Publisher == nil {
		return nil, errors.New("sender: publisher is nil")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = 250 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = time.Minute
	}
	if opts.MaxDelay < opts.BaseDelay {
		return nil, fmt.Errorf("sender: max delay %s is shorter than base delay %s", opts.MaxDelay, opts.BaseDelay)
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 30 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	return &Sender{
		pub: opts.Publisher, log: opts.Logger, timeout: opts.AttemptTimeout, workers: opts.Workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[key](opts.BaseDelay, opts.MaxDelay),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "relay-sender"}),
		pending: map[key]*bus.Message{},
	}, nil
}

// Send queues msgs for queue and returns at once. A message whose ID is
// already waiting replaces the waiting copy (same ID, same event).
func (s *Sender) Send(queue string, msgs ...bus.Message) {
	for i := range msgs {
		msg := msgs[i]
		pendingKey := key{queue: queue, id: msg.ID}
		s.mu.Lock()
		s.pending[pendingKey] = &msg
		s.mu.Unlock()
		s.queue.Add(pendingKey)
	}
}

// Pending is the number of messages not yet published.
func (s *Sender) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Run publishes until ctx is done, then reports what it could not send.
func (s *Sender) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.workers {
		wg.Go(func() {
			for s.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return
	}
	ids := make([]string, 0, len(s.pending))
	for pendingKey := range s.pending {
		ids = append(ids, pendingKey.queue+":"+pendingKey.id)
	}
	sort.Strings(ids)
	// Not silent: the next relay re-lists the cluster and its resync
	// re-emits the provision triggers; lifecycle events are re-derived from
	// the objects by the Functions' own sweeps.
	s.log.Error("relay stopping with unsent messages", "count", len(ids), "messages", ids)
}

func (s *Sender) next(ctx context.Context) bool {
	pendingKey, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(pendingKey)
	if ctx.Err() != nil {
		return false // stays pending; Run reports it
	}
	s.mu.Lock()
	msg := s.pending[pendingKey]
	s.mu.Unlock()
	if msg == nil { // already published under this key
		s.queue.Forget(pendingKey)
		return true
	}

	attemptCtx, cancel := context.WithTimeout(ctx, s.timeout)
	err := s.publish(attemptCtx, pendingKey.queue, *msg)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		s.log.Warn("publishing failed; will retry", "queue", pendingKey.queue, "id", pendingKey.id,
			"attempt", s.queue.NumRequeues(pendingKey)+1, "error", err)
		s.queue.AddRateLimited(pendingKey)
		return true
	}
	s.queue.Forget(pendingKey)
	s.mu.Lock()
	if s.pending[pendingKey] == msg { // a newer copy that arrived meanwhile stays queued
		delete(s.pending, pendingKey)
	}
	s.mu.Unlock()
	s.log.Debug("published", "queue", pendingKey.queue, "id", pendingKey.id)
	return true
}

// publish sends msg in a producer span whose W3C trace context the message
// carries in its application properties (traceparent, Diagnostic-Id), so
// the Function that handles it continues the same trace.
func (s *Sender) publish(ctx context.Context, queue string, msg bus.Message) error {
	ctx, span := otel.Tracer(scope).Start(ctx, queue+" publish", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "servicebus"), attribute.String("messaging.destination.name", queue),
			attribute.String("messaging.message.id", msg.ID)))
	defer span.End()
	msg.ApplicationProperties = telemetry.Inject(ctx, maps.Clone(msg.ApplicationProperties))
	err := s.pub.Publish(ctx, queue, msg)
	outcome := "success"
	if err != nil {
		outcome = "retry"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	publishedTotal.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", queue), attribute.String("outcome", outcome)))
	return err
}
