// Package triggers owns every message karpfunc's parts send on Service
// Bus: the relay's events (pods to place, a Node or NodeClaim that changed,
// a spot preemption, pod events for disruption) and the continuations a
// Function sends to itself (a provisioning pass after a NodeClaim was given
// up, a drain retry, a liveness check at the end of the registration
// timeout, a launch check, a disruption pass or validation). Continuations
// are scheduled Service Bus messages (ScheduledEnqueueTime), not timers in
// memory, so they survive the instance that sent them.
//
// One constructor per message kind fixes the queue, the session, the
// MessageId and the application properties; nothing outside this package
// builds a MessageId. The IDs carry the deduplication rules: Service Bus
// duplicate detection drops a second message with an ID it saw within its
// window, so each constructor's ID says which messages are "the same".
package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// Source is the CloudEvents source of the Functions' continuations.
const Source = "/karpfunc/functions"

// RelaySource is the CloudEvents source of the relay's events for cluster.
func RelaySource(cluster string) string { return "/karpfunc/relay/" + cluster }

// Application property names set on every message, so a consumer or an
// operator browsing a queue can route and filter without decoding the body.
const (
	PropertyType    = "type"
	PropertyCluster = "cluster"
)

// Continuation is one message to send: what it says (a CloudEvent of one
// type), where it goes (queue, session) and under which MessageId, and when
// Service Bus delivers it. Only this package's constructors make one, so
// every ID follows one of the documented formats.
type Continuation struct {
	queue   string
	id      string
	session string
	typ     string
	subject string
	cluster string
	// created is the CloudEvent time; due the ScheduledEnqueueTime (zero:
	// delivered as soon as sent).
	created time.Time
	due     time.Time
	data    any
}

// Queue is the logical queue the continuation goes to (bus.Queue*).
func (c Continuation) Queue() string { return c.queue }

// ID is the Service Bus MessageId (and the CloudEvent id).
func (c Continuation) ID() string { return c.id }

// Type is the CloudEvent type.
func (c Continuation) Type() string { return c.typ }

// Due is when Service Bus delivers it; zero means as soon as it is sent.
func (c Continuation) Due() time.Time { return c.due }

// String is the continuation for a log line.
func (c Continuation) String() string {
	if c.due.IsZero() {
		return fmt.Sprintf("%s %s now", c.queue, c.id)
	}
	return fmt.Sprintf("%s %s at %s", c.queue, c.id, c.due.UTC().Format(time.RFC3339Nano))
}

// Message encodes the continuation as a structured-mode CloudEvent from
// source, with its Service Bus properties, and checks it against what
// Service Bus accepts (bus.ValidateMessages).
func (c Continuation) Message(source string) (bus.Message, error) {
	if c.id == "" || c.queue == "" || c.typ == "" {
		return bus.Message{}, errors.New("triggers: continuation was not built by a constructor of package triggers (no id, queue or type)")
	}
	ev, err := messages.New(c.id, source, c.typ, c.subject, c.created, c.data)
	if err != nil {
		return bus.Message{}, err
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return bus.Message{}, fmt.Errorf("encoding %s %s: %w", c.typ, c.id, err)
	}
	props := map[string]any{PropertyType: c.typ}
	if c.cluster != "" {
		props[PropertyCluster] = c.cluster
	}
	msg := bus.Message{ID: c.id, SessionID: c.session, ContentType: messages.ContentType, Body: body, ApplicationProperties: props}
	if !c.due.IsZero() {
		msg.ScheduledEnqueueTime = c.due.UTC()
	}
	if err := bus.ValidateMessages(c.queue, []bus.Message{msg}); err != nil {
		return bus.Message{}, fmt.Errorf("triggers: %w", err)
	}
	return msg, nil
}

// Publish sends continuations from Source, each to its queue, in order;
// with a nil publisher it does nothing (a controller run without a bus,
// as in some tests and the demo). Every continuation is tried; the error
// names those that were not sent.
func Publish(ctx context.Context, pub bus.Publisher, conts ...Continuation) error {
	if pub == nil {
		return nil
	}
	var errs []error
	for _, cont := range conts {
		msg, err := cont.Message(Source)
		if err == nil {
			err = pub.Publish(ctx, cont.queue, msg)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sending %s: %w", cont, err))
		}
	}
	return errors.Join(errs...)
}

// Due is when a retry asked for d after now runs: now+d rounded down to a
// multiple of d, so never later than asked. Every retry chain of the same
// period then lands on the same instants, and chains an event started
// beside an existing one (a Node update during a drain, a second
// termination) get the same retry ID from their second hop on: duplicate
// detection collapses them into one, and an idle drain costs one
// invocation per period, not one per event that ever touched it. A
// chain's first hop may come early (at most d sooner). d <= 0 means now.
func Due(now time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return now
	}
	return now.Add(d).Truncate(d)
}

// retryID is the ID of a retry that must not be deduplicated against the
// original message: the original id plus the time the retry is due.
func retryID(base string, at time.Time) string {
	return fmt.Sprintf("%s/retry/%d", base, at.UnixMilli())
}

// scheduled is a continuation created and due at at.
func scheduled(queue, id, session, typ, subject, cluster string, at time.Time, data any) Continuation {
	return Continuation{queue: queue, id: id, session: session, typ: typ, subject: subject, cluster: cluster,
		created: at, due: at, data: data}
}
