// Package triggers builds the messages a Function sends to itself: a
// provisioning pass after a NodeClaim was given up, a drain retry, a
// liveness check at the end of the registration timeout. They are scheduled
// Service Bus messages (ScheduledEnqueueTime), not timers in memory, so they
// survive the instance that sent them.
package triggers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// Source is the CloudEvents source of self-sent triggers.
const Source = "/karpfunc/functions"

// Provision is a provisioning pass for cluster at time at. The provision
// queue is session-enabled; the session is the cluster, like the relay's.
func Provision(cluster, id string, at time.Time) (bus.Message, error) {
	return build(id, cluster, messages.TypeProvision, "retry", at, messages.Provision{Cluster: cluster, Pods: []messages.ObjectRef{}})
}

// Disruption is a Disruption pass for cluster at time at; cause says why
// (for the log). The disruption queue is session-enabled like the
// provision queue: the session is the cluster.
func Disruption(cluster, id, cause string, at time.Time) (bus.Message, error) {
	return build(id, cluster, messages.TypeDisruption, cause, at, messages.Disruption{Cluster: cluster, Cause: cause})
}

// DisruptionValidate is the re-check of cmd at time at.
func DisruptionValidate(id string, cmd messages.DisruptionCommand, at time.Time) (bus.Message, error) {
	return build(id, cmd.Cluster, messages.TypeDisruptionValidate, cmd.Method, at, cmd)
}

// DisruptionSlotID is the MessageId of a Disruption pass asked for cause in
// the slot of length period that holds now: every trigger of one slot
// collapses into one message (duplicate detection), so a burst of pod
// deletions costs one pass. It goes with ScheduledEnqueueTime Due(now,
// period).
func DisruptionSlotID(cluster, cause string, now time.Time, period time.Duration) string {
	return fmt.Sprintf("disruption/%s/%s/%d", cluster, cause, Due(now, period).UnixMilli())
}

// NodeClaim is a lifecycle trigger of type typ (TypeNodeClaimDeleting or
// TypeNodeClaimLiveness) for one NodeClaim, delivered at time at.
func NodeClaim(typ, cluster, name, uid, id string, at time.Time) (bus.Message, error) {
	return build(id, "", typ, name, at, messages.NodeClaim{Cluster: cluster, Name: name, UID: uid})
}

// LivenessID is the MessageId of a NodeClaim's liveness check: one per
// NodeClaim, so a launch repeated after a crash schedules it only once
// (duplicate detection).
func LivenessID(uid string) string { return "nodeclaim/" + uid + "/liveness" }

// DeletingID is the MessageId of the "NodeClaim is being deleted" trigger
// for the NodeClaim with uid: the relay and the Functions use the same one,
// so the two copies collapse into one Terminate chain.
func DeletingID(uid string) string { return "nodeclaim/" + uid + "/deleting" }

// Due is when a retry asked for d after now runs: now+d rounded down to a
// multiple of d, so never later than asked. Every retry chain of the same
// period then lands on the same instants, and chains an event started
// beside an existing one (a Node update during a drain, a second
// termination) get the same RetryID from their second hop on: duplicate
// detection collapses them into one, and an idle drain costs one
// invocation per period, not one per event that ever touched it. A
// chain's first hop may come early (at most d sooner). d <= 0 means now.
func Due(now time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return now
	}
	return now.Add(d).Truncate(d)
}

// LaunchCheck is the look at NodeClaim name's VM create due at time at.
// Its MessageId is the NodeClaim's UID and that time, which the launch
// records on the NodeClaim: however often a check is re-sent (a redelivered
// message, a Provision pass reviving a stalled launch), one message per
// due time survives duplicate detection.
func LaunchCheck(cluster, name, uid string, at time.Time) (bus.Message, error) {
	return NodeClaim(messages.TypeNodeClaimLaunch, cluster, name, uid, LaunchCheckID(uid, at), at)
}

// LaunchCheckID is the MessageId of LaunchCheck.
func LaunchCheckID(uid string, at time.Time) string {
	return fmt.Sprintf("nodeclaim/%s/launch/%d", uid, at.UnixMilli())
}

// ScheduleLaunchCheck publishes LaunchCheck on the lifecycle queue; with a
// nil publisher it does nothing.
func ScheduleLaunchCheck(ctx context.Context, pub bus.Publisher, cluster, name, uid string, at time.Time) error {
	if pub == nil {
		return nil
	}
	m, err := LaunchCheck(cluster, name, uid, at)
	if err != nil {
		return err
	}
	if err := pub.Publish(ctx, bus.QueueLifecycle, m); err != nil {
		return fmt.Errorf("scheduling the launch check of NodeClaim %s at %s: %w", name, at.Format(time.RFC3339), err)
	}
	return nil
}

// RetryID is a MessageId for a retry that must not be deduplicated against
// the original message: the original id plus the time the retry is due.
func RetryID(base string, at time.Time) string {
	return fmt.Sprintf("%s/retry/%d", base, at.UnixMilli())
}

func build(id, session, typ, subject string, at time.Time, data any) (bus.Message, error) {
	ev, err := messages.New(id, Source, typ, subject, at, data)
	if err != nil {
		return bus.Message{}, err
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return bus.Message{}, fmt.Errorf("encoding %s %s: %w", typ, id, err)
	}
	return bus.Message{ID: id, SessionID: session, ContentType: messages.ContentType, Body: body,
		ScheduledEnqueueTime: at.UTC(), ApplicationProperties: map[string]any{"type": typ}}, nil
}
