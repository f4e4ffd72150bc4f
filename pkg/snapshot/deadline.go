package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// OutOfTimeError says a pass ran out of its invocation's time before it
// acted: it stopped after Phase (the snapshot, the solve) and wrote
// nothing that depends on the decision it did not finish. The message is
// delivered again, and the next pass starts over from a fresh snapshot.
type OutOfTimeError struct {
	// Phase is what the pass was doing when its time ran out.
	Phase string
	// Deadline is the invocation's deadline (zero when the context was
	// cancelled without one).
	Deadline time.Time
	// Spent is how long the pass had run.
	Spent time.Duration
	error
}

func (e *OutOfTimeError) Error() string {
	when := "its context was cancelled"
	if !e.Deadline.IsZero() {
		when = "its deadline " + e.Deadline.UTC().Format(time.RFC3339) + " passed"
	}
	return fmt.Sprintf("the pass ran out of its invocation's time during the %s (%s after %s): nothing was actuated; the message's next delivery runs the pass again (raise functionTimeout in host.json if this repeats): %v",
		e.Phase, when, e.Spent.Round(time.Millisecond), e.error)
}

func (e *OutOfTimeError) Unwrap() error { return e.error }

// CheckTime returns an *OutOfTimeError when ctx has ended: a pass calls
// it after a phase and before it acts on the phase's result. started is
// when the pass began.
func CheckTime(ctx context.Context, phase string, started time.Time) error {
	if ctx.Err() == nil {
		return nil
	}
	return outOfTime(ctx, phase, started, context.Cause(ctx))
}

func outOfTime(ctx context.Context, phase string, started time.Time, err error) error {
	deadline, _ := ctx.Deadline()
	return &OutOfTimeError{Phase: phase, Deadline: deadline, Spent: time.Since(started), error: err}
}

// timeErr turns an error a phase ended with into an *OutOfTimeError when
// the context ended (the error is then the context's, whatever layer
// wrapped it), else returns it as it is.
func timeErr(ctx context.Context, phase string, started time.Time, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	var already *OutOfTimeError
	if errors.As(err, &already) {
		return err
	}
	return outOfTime(ctx, phase, started, err)
}
