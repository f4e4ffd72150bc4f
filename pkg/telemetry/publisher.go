package telemetry

import (
	"context"
	"maps"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// TracingPublisher returns pub with every message carrying the trace
// context of the ctx it is published with, so a Function's scheduled
// messages to itself (launch checks, liveness checks, drain retries)
// continue the trace of the work that scheduled them. The caller's
// messages are not modified.
func TracingPublisher(pub bus.Publisher) bus.Publisher { return tracingPublisher{pub} }

type tracingPublisher struct{ bus.Publisher }

func (p tracingPublisher) Publish(ctx context.Context, queue string, msgs ...bus.Message) error {
	out := make([]bus.Message, len(msgs))
	for i, msg := range msgs {
		msg.ApplicationProperties = Inject(ctx, maps.Clone(msg.ApplicationProperties))
		out[i] = msg
	}
	return p.Publisher.Publish(ctx, queue, out...)
}
