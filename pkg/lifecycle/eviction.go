package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Evictor asks the API server to evict one pod through the Eviction API,
// with exactly one request. A refusal by a PodDisruptionBudget comes back
// as an EvictionBlockedError.
type Evictor func(ctx context.Context, ev *policyv1.Eviction) error

// EvictionBlockedError means the API server refused an eviction with 429:
// a PodDisruptionBudget allows no disruption now, or its status has not
// been observed by the disruption controller yet. The drain is retried
// later by a scheduled message, never by waiting inside the invocation.
type EvictionBlockedError struct {
	Namespace, Pod string
	// Reason is the API server's message (and cause, when it gives one).
	Reason string
	// RetryAfter is the API server's Retry-After suggestion; 0 if none.
	RetryAfter time.Duration
}

func (e *EvictionBlockedError) Error() string {
	msg := fmt.Sprintf("eviction of pod %s/%s blocked: %s", e.Namespace, e.Pod, e.Reason)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (the API server suggests retrying after %s)", e.RetryAfter)
	}
	return msg
}

// NewEvictionBlockedError returns an EvictionBlockedError.
func NewEvictionBlockedError(namespace, pod, reason string, retryAfter time.Duration) error {
	return &EvictionBlockedError{Namespace: namespace, Pod: pod, Reason: reason, RetryAfter: retryAfter}
}

// IsEvictionBlocked reports whether err is, or wraps, an EvictionBlockedError.
func IsEvictionBlocked(err error) bool {
	var blocked *EvictionBlockedError
	return errors.As(err, &blocked)
}

// NewEvictor returns an Evictor that talks to the API server behind cfg.
//
// It exists because every other client-go path (the typed clientset's
// Evict, controller-runtime's SubResource("eviction").Create) silently
// retries a 429 that carries Retry-After, up to 10 times. The API server
// answers exactly that — 429 with Retry-After: 10 — while a PDB's status
// has not been observed yet, so one Terminate invocation would hang for
// about 100 s instead of scheduling its own retry. MaxRetries(0) makes the
// request answer at once.
func NewEvictor(cfg *rest.Config) (Evictor, error) {
	if cfg == nil {
		return nil, errors.New("building the pod evictor: no rest.Config")
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("building the pod evictor's client: %w", err)
	}
	rc := cs.PolicyV1().RESTClient()
	return func(ctx context.Context, ev *policyv1.Eviction) error {
		// The same request as the typed client's Evict, without retries.
		err := rc.Post().
			AbsPath("/api/v1").
			Namespace(ev.Namespace).
			Resource("pods").
			Name(ev.Name).
			SubResource("eviction").
			Body(ev).
			MaxRetries(0).
			Do(ctx).
			Error()
		if apierrors.IsTooManyRequests(err) {
			reason := err.Error()
			var status apierrors.APIStatus
			if errors.As(err, &status) {
				if details := status.Status().Details; details != nil {
					for _, cause := range details.Causes {
						if cause.Type == policyv1.DisruptionBudgetCause && cause.Message != "" {
							reason += ": " + cause.Message
						}
					}
				}
			}
			var after time.Duration
			if s, ok := apierrors.SuggestsClientDelay(err); ok {
				after = time.Duration(s) * time.Second
			}
			return NewEvictionBlockedError(ev.Namespace, ev.Name, reason, after)
		}
		return err
	}, nil
}
