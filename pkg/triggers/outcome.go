package triggers

import (
	"strings"
	"time"
)

// Outcome is what handling one message asks for besides its error: the
// continuations to send (when to look again, and at what), and, when the
// work is waiting rather than failing, why. Waiting is not failing: a drain
// blocked by a PodDisruptionBudget or a VM delete under way completes its
// message and schedules the next look, so a PDB that blocks for an hour
// never reaches the dead-letter queue.
//
// The Functions' adapter publishes the continuations after the handler
// returns, also when it returns an error (work done before the error still
// asks for its look), and logs the outcome.
type Outcome struct {
	Continuations []Continuation
	// Waiting says what the work waits for (nil: it is not waiting).
	Waiting error
}

// Then adds continuations to the outcome.
func (o *Outcome) Then(conts ...Continuation) { o.Continuations = append(o.Continuations, conts...) }

// Wait records that the work waits for reason and looks again with next.
func Wait(reason error, next Continuation) Outcome {
	return Outcome{Continuations: []Continuation{next}, Waiting: reason}
}

// Next is the earliest due time among the continuations (zero: none, or
// all are due now).
func (o Outcome) Next() time.Time {
	var next time.Time
	for _, cont := range o.Continuations {
		if !cont.due.IsZero() && (next.IsZero() || cont.due.Before(next)) {
			next = cont.due
		}
	}
	return next
}

// String is the outcome for a log line.
func (o Outcome) String() string {
	if len(o.Continuations) == 0 && o.Waiting == nil {
		return "done"
	}
	parts := make([]string, 0, len(o.Continuations)+1)
	if o.Waiting != nil {
		parts = append(parts, "waiting: "+o.Waiting.Error())
	}
	for _, cont := range o.Continuations {
		parts = append(parts, "then "+cont.String())
	}
	return strings.Join(parts, "; ")
}
