package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// The adapter is the one place between the Functions host and the
// controllers: for every function it decodes the trigger's payload into an
// event, dispatches on the event's type from the function's table, sends
// the continuations the handler asks for (built only by pkg/triggers),
// reports a failure onto the objects the message is about, and logs the
// outcome. A handler decodes its event's data, calls its controller and
// says what to do next; it never publishes.

// handler handles one event of one type.
type handler func(ctx context.Context, c *call) (triggers.Outcome, error)

// route is one row of a function's table: the handler of an event type,
// and the objects such an event is about (where a failure is reported;
// nil: none, the work is cluster-wide).
type route struct {
	handle   handler
	subjects func(ev messages.CloudEvent) []client.Object
}

// function is one Azure Function: how its trigger's payload becomes an
// event (decodeEvent for the queues' CloudEvents) and its table of routes.
type function struct {
	name   string
	decode func(inv *customhandler.Invocation) (messages.CloudEvent, error)
	routes map[string]route
}

// call is one invocation as a handler sees it.
type call struct {
	fn  string
	inv *customhandler.Invocation
	ev  messages.CloudEvent
	log *customhandler.Logger
	// subjects are where a failure is reported: the objects the event
	// names, then those the handler learns (about).
	subjects []client.Object
}

// about adds objects a failure of this call is reported on; only their
// kind and name are used (the adapter reads them again before writing).
func (c *call) about(objs ...client.Object) { c.subjects = append(c.subjects, objs...) }

// maxFailureSubjects bounds the Warning events one failed delivery
// writes: a provision batch names up to triggers.MaxPodsPerMessage pods,
// and a failure retried ten times must not write thousands of events.
const maxFailureSubjects = 10

// runtimeDeps is what the adapter needs from the built dependencies; each
// is nil until they are built (a failure before that is only logged).
type runtimeDeps interface {
	publisher() bus.Publisher
	kubeClient() client.Client
	eventRecorder() *events.Recorder
}

// adapt is fn as a custom-handler function.
func adapt(fn function, deps runtimeDeps) customhandler.Func {
	return func(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
		ev, err := fn.decode(inv)
		if err != nil {
			log.Printf("%s: message %s (delivery %d) refused: %v", fn.name, inv.Metadata.MessageID, inv.Metadata.DeliveryCount, err)
			return err
		}
		rt, ok := fn.routes[ev.Type]
		if !ok {
			err := messages.NewInvalidError("%s got CloudEvent %s of unknown type %q; it handles %s", fn.name, ev.ID, ev.Type, fn.handled())
			log.Printf("%s: %v", fn.name, err)
			return err
		}
		current := &call{fn: fn.name, inv: inv, ev: ev, log: log}
		if rt.subjects != nil {
			current.about(rt.subjects(ev)...)
		}
		// The pass runs to passTimeout; what follows it (continuations,
		// the failure's events) keeps the invocation's own context.
		passCtx, cancel := ctx, context.CancelFunc(func() {})
		if limit := passTimeout(); limit > 0 {
			passCtx, cancel = context.WithTimeout(ctx, limit)
		}
		out, err := rt.handle(passCtx, current)
		cancel()
		var outOfTime *snapshot.OutOfTimeError
		if errors.As(err, &outOfTime) {
			log.Printf("%s %s %s (delivery %d): out of invocation time in the %s after %s; nothing acted on",
				fn.name, ev.Type, ev.ID, inv.Metadata.DeliveryCount, outOfTime.Phase, outOfTime.Spent.Round(time.Millisecond))
		}
		// Continuations go out also after an error: work done before it
		// (a NodeClaim deleted, a pass decided) still asks for its look.
		if perr := publishOutcome(ctx, deps.publisher(), out); perr != nil {
			err = errors.Join(err, perr)
		}
		if err != nil {
			reportFailure(ctx, deps, current, err)
			return err
		}
		log.Printf("%s %s %s (delivery %d): %s", fn.name, ev.Type, ev.ID, inv.Metadata.DeliveryCount, out)
		return nil
	}
}

// types lists the event types fn handles, for the refusal of another.
func (fn function) types() string {
	types := make([]string, 0, len(fn.routes))
	for typ := range fn.routes {
		types = append(types, typ)
	}
	slices.Sort(types)
	return strings.Join(types, ", ")
}

// handled is types as the refusal says it: "only X" when fn handles one.
func (fn function) handled() string {
	if len(fn.routes) == 1 {
		return "only " + fn.types()
	}
	return fn.types()
}

// publishOutcome sends the outcome's continuations. Continuations without
// a publisher are an error, never dropped: the look they ask for would
// never happen.
func publishOutcome(ctx context.Context, pub bus.Publisher, out triggers.Outcome) error {
	if len(out.Continuations) == 0 {
		return nil
	}
	if pub == nil {
		return fmt.Errorf("no Service Bus publisher to send %s", out)
	}
	if err := triggers.Publish(ctx, pub, out.Continuations...); err != nil {
		return fmt.Errorf("sending the continuations: %w", err)
	}
	return nil
}
