// Package events writes Kubernetes Events with Karpenter's reasons, directly
// and synchronously.
//
// client-go's broadcaster sends events from a background goroutine; a
// Function invocation may end (and its instance be frozen) before that
// goroutine runs, so events would be lost. Writing them inline costs one API
// call (a create; a repeat is read and has its count bumped) and lets the
// same reason on the same object be deduplicated across invocations: the
// event name is derived from object, reason and message, and a repeat only
// bumps its count.
//
// An event with DedupeValues is deduplicated as Karpenter's recorder does
// (sigs.k8s.io/karpenter pkg/events/recorder.go): the same reason and
// values on the same object are written once per DedupeTimeout, whatever
// the message says (a message may carry a time). The event itself is the
// record of the last write (its name comes from object, reason and values,
// its lastTimestamp is when it was written), so every function instance,
// cold or warm, honours the same window; a Recorder also remembers what it
// wrote, to skip the read.
package events

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

// Karpenter's event reasons, so existing alerts and dashboards keep working.
const (
	ReasonNominated                 = "Nominated"
	ReasonFailedScheduling          = "FailedScheduling"
	ReasonLaunched                  = "Launched"
	ReasonRegistered                = "Registered"
	ReasonInitialized               = "Initialized"
	ReasonInsufficientCapacityError = "InsufficientCapacityError"
	ReasonFailedDraining            = "FailedDraining"
	ReasonTerminating               = "Terminating"
	ReasonLaunchFailed              = "LaunchFailed"
	ReasonEvicted                   = "Evicted"
	ReasonDisrupted                 = "Disrupted"
	// ReasonRegistrationTimeout is on a NodeClaim liveness deleted
	// (Karpenter logs this; karpfunc makes it visible as an event).
	ReasonRegistrationTimeout = "RegistrationTimeout"
	// ReasonGarbageCollected is on a NodeClaim the Sweep deleted because
	// its VM is gone.
	ReasonGarbageCollected = "GarbageCollected"
	// ReasonNoNodeImage is on a NodePool none of whose allowed instance
	// types has a node image in its AKSNodeClass's image family.
	ReasonNoNodeImage = "NoNodeImage"
	// ReasonHandlerFailed is on the object a message names when a
	// Function failed on it (the dead letter does not carry the error).
	ReasonHandlerFailed = "HandlerFailed"
	// Disruption (Karpenter's reasons): a replacement launched for a
	// command, a node disrupted, a node or NodePool that may not be
	// disrupted and why, a node consolidation would not take and why.
	ReasonDisruptionLaunching   = "DisruptionLaunching"
	ReasonDisruptionTerminating = "DisruptionTerminating"
	ReasonDisruptionBlocked     = "DisruptionBlocked"
	ReasonUnconsolidatable      = "Unconsolidatable"
)

// Component is the event source written on every event.
const Component = "karpfunc"

// Event is one event about one object.
type Event struct {
	Object  client.Object
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string
	// DedupeValues, when set, say what makes two events the same (with
	// the object and reason) in place of the message: one is written per
	// DedupeTimeout, with the latest message.
	DedupeValues []string
	// DedupeTimeout is the window (default DefaultDedupeTimeout).
	DedupeTimeout time.Duration
	// RateLimiter, when set, is asked for a token before the event is
	// written, as Karpenter's Event.RateLimiter: one limiter shared by a
	// kind of event (kept for the process's life, so a warm instance
	// honours it across invocations) bounds how fast that kind is
	// written. An event it refuses is not written; Record says
	// RateLimited, for the caller to count.
	RateLimiter flowcontrol.PassiveRateLimiter
}

// DefaultDedupeTimeout is Karpenter's defaultDedupeTimeout.
const DefaultDedupeTimeout = 2 * time.Minute

// Recorder writes events through the API server.
type Recorder struct {
	kube  client.Client
	clock clock.Clock

	mu      sync.Mutex
	written map[string]time.Time // deduplicated event name -> when this Recorder wrote it
}

// NewRecorder returns a Recorder writing with kube.
func NewRecorder(kube client.Client, clk clock.Clock) *Recorder {
	return &Recorder{kube: kube, clock: clk, written: map[string]time.Time{}}
}

// Outcome is what Record did with an event.
type Outcome int

const (
	// Written: created, or an identical earlier event's count bumped.
	Written Outcome = iota
	// Remembered: this Recorder wrote it within its dedupe window; no
	// request was made.
	Remembered
	// Duplicate: the API server holds it, written within its dedupe
	// window (by any instance); read, not written.
	Duplicate
	// RateLimited: its RateLimiter refused it; not written.
	RateLimited
)

func (o Outcome) String() string {
	switch o {
	case Written:
		return "written"
	case Remembered:
		return "remembered"
	case Duplicate:
		return "duplicate"
	case RateLimited:
		return "rate limited"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Requested reports whether the API server was asked (a read or a write).
func (o Outcome) Requested() bool { return o == Written || o == Duplicate }

// Publish writes ev, or bumps the count of an identical earlier event; an
// event with DedupeValues written within its window is not written again,
// nor is one its RateLimiter refuses. Record says which.
func (r *Recorder) Publish(ctx context.Context, ev Event) error {
	_, err := r.Record(ctx, ev)
	return err
}

// Record is Publish, saying what it did with ev. As Karpenter's recorder
// (sigs.k8s.io/karpenter pkg/events/recorder.go publishEvent), the dedupe
// window is looked at first and the RateLimiter asked after, so a
// duplicate this Recorder remembers takes no token. The limiter is asked
// before the API server is (it bounds requests, reads included), so a
// cold instance spends a token on an event it then finds written within
// its window.
func (r *Recorder) Record(ctx context.Context, ev Event) (Outcome, error) {
	gvk, err := r.kube.GroupVersionKindFor(ev.Object)
	if err != nil {
		return Written, fmt.Errorf("event %s on %s: %w", ev.Reason, ev.Object.GetName(), err)
	}
	w := r.newWrite(ev, gvk)
	if w.window > 0 && r.recent(w.name, w.now.Time, w.window) {
		return Remembered, nil
	}
	if ev.RateLimiter != nil && !ev.RateLimiter.TryAccept() {
		return RateLimited, nil
	}
	outcome := Written
	err = retry.OnError(publishRetry, retryable, func() error {
		var err error
		outcome, err = r.writeOnce(ctx, w)
		return err
	})
	if err != nil {
		return outcome, fmt.Errorf("writing event %s on %s %s: %w", ev.Reason, gvk.Kind, ev.Object.GetName(), err)
	}
	if w.window > 0 {
		r.note(w.name, w.writtenAt)
	}
	return outcome, nil
}

// write is one event on its way to the API server.
type write struct {
	ev        Event
	namespace string
	name      string
	window    time.Duration // zero: not deduplicated
	now       metav1.Time
	reference corev1.ObjectReference
	// writtenAt is when the event was last written: now, or the time a
	// duplicate found within its window says.
	writtenAt time.Time
}

func (r *Recorder) newWrite(ev Event, gvk schema.GroupVersionKind) *write {
	obj := ev.Object
	namespace := cmp.Or(obj.GetNamespace(), metav1.NamespaceDefault)
	now := metav1.NewTime(r.clock.Now())
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	w := &write{ev: ev, namespace: namespace, name: eventName(obj, ev.Reason, ev.Message), now: now, writtenAt: now.Time,
		reference: corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()}}
	if len(ev.DedupeValues) > 0 {
		w.name = dedupeName(ev)
		w.window = cmp.Or(ev.DedupeTimeout, DefaultDedupeTimeout)
	}
	return w
}

func (w *write) fresh() *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: w.namespace, Name: w.name},
		InvolvedObject: w.reference,
		Reason:         w.ev.Reason, Message: truncate(w.ev.Message, 1024), Type: w.ev.Type,
		Source:         corev1.EventSource{Component: Component},
		FirstTimestamp: w.now, LastTimestamp: w.now, Count: 1,
		ReportingController: apis.ReportingControllerPrefix + Component, ReportingInstance: Component,
	}
}

// Two invocations can publish the same event at once (a duplicate message,
// two drains of one pod). The loser of the create or of the count update
// starts again from a fresh read, so every publish counts.
func retryable(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

// writeOnce makes one attempt at w.
func (r *Recorder) writeOnce(ctx context.Context, w *write) (Outcome, error) {
	if w.window == 0 {
		// Without a window most events are new (a pod nominated to a
		// claim): the create comes first and costs the one request;
		// only a repeat reads the event to bump its count.
		if err := r.kube.Create(ctx, w.fresh()); !apierrors.IsAlreadyExists(err) {
			return Written, err
		}
	}
	existing := &corev1.Event{}
	err := r.kube.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: w.name}, existing)
	switch {
	case err == nil && w.window > 0 && w.now.Sub(existing.LastTimestamp.Time) < w.window:
		w.writtenAt = existing.LastTimestamp.Time // within the window, by any instance
		return Duplicate, nil
	case err == nil:
		existing.Count++
		existing.LastTimestamp = w.now
		existing.Message = truncate(w.ev.Message, 1024)
		// resourceVersion from the Get makes this a compare-and-swap: a
		// concurrent bump is a Conflict, retried, never lost.
		return Written, client.IgnoreNotFound(r.kube.Update(ctx, existing))
	case !apierrors.IsNotFound(err):
		return Written, fmt.Errorf("reading event %s/%s: %w", w.namespace, w.name, err)
	}
	return Written, r.kube.Create(ctx, w.fresh())
}

// Remembers reports whether this Recorder wrote ev (one with DedupeValues)
// within its dedupe window: Record would make no request for it.
func (r *Recorder) Remembers(ev Event) bool {
	if len(ev.DedupeValues) == 0 {
		return false
	}
	return r.recent(dedupeName(ev), r.clock.Now(), cmp.Or(ev.DedupeTimeout, DefaultDedupeTimeout))
}

// recent reports whether this Recorder wrote the deduplicated event name
// within window of now.
func (r *Recorder) recent(name string, now time.Time, window time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.written[name]
	return ok && now.Sub(at) < window
}

// note remembers that the deduplicated event name was written (or found
// written) at at; bounded: it forgets everything rather than grow.
func (r *Recorder) note(name string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.written) > 100000 {
		r.written = map[string]time.Time{}
	}
	r.written[name] = at
}

// publishRetry is client-go's DefaultRetry with more steps and more
// jitter: each round lets one of the concurrent publishers through, so a
// handful of them racing needs about as many rounds as there are racers.
var publishRetry = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 1}

// dedupeName names an event with DedupeValues: object, reason and values,
// whatever the message.
func dedupeName(ev Event) string {
	return eventName(ev.Object, ev.Reason, "dedupe\x00"+strings.Join(ev.DedupeValues, "\x00"))
}

func eventName(obj client.Object, reason, message string) string {
	sum := sha256.Sum256([]byte(string(obj.GetUID()) + "\x00" + reason + "\x00" + message))
	prefix := obj.GetName()
	if len(prefix) > 200 {
		prefix = prefix[:200]
	}
	return prefix + "." + hex.EncodeToString(sum[:])[:16]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
