// Package bus is how karpfunc sends messages between its parts: the relay to
// the Functions, and a Function to itself later (scheduled liveness checks,
// drain retries). Production uses Azure Service Bus; development and tests use
// the local Functions host's in-process queues over loopback HTTP. Both sit
// behind Publisher, so no caller knows which one it has.
package bus

import (
	"context"
	"time"
)

// Queue names. The Functions' function.json files bind to these through the
// %PROVISION_QUEUE%-style app settings.
const (
	QueueProvision    = "provision"
	QueueLifecycle    = "lifecycle"
	QueueInterruption = "interruption"
	// QueueDisruption carries "look again" triggers and scheduled
	// validations for the Disruption function; sessions keyed by cluster
	// serialize its passes (one command at a time per cluster).
	QueueDisruption = "disruption"
)

// Message is one Service Bus message, with the properties karpfunc relies on.
type Message struct {
	// ID is the MessageId; Service Bus duplicate detection keys on it, so a
	// publisher that sends the same logical event twice must use the same ID.
	ID string `json:"id"`
	// SessionID serializes delivery: messages with the same SessionID are
	// handled one at a time, in order. Provisioning keys it by cluster.
	SessionID string `json:"sessionId,omitempty"`
	// ContentType is the MIME type of Body ("application/cloudevents+json").
	ContentType string `json:"contentType,omitempty"`
	// Body is the payload, a CloudEvent in structured JSON mode.
	Body []byte `json:"body"`
	// ScheduledEnqueueTime delays delivery until that time (zero: now).
	ScheduledEnqueueTime time.Time `json:"scheduledEnqueueTime,omitzero"`
	// ApplicationProperties are user properties, visible without decoding Body.
	ApplicationProperties map[string]any `json:"applicationProperties,omitempty"`
}

// Publisher sends messages to a named queue.
type Publisher interface {
	// Publish sends msgs to queue, all or none where the transport allows.
	Publish(ctx context.Context, queue string, msgs ...Message) error
	// Close releases connections.
	Close(ctx context.Context) error
}
