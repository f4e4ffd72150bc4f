package triggers

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// One constructor per message kind. The provision and disruption queues
// are session-enabled: their session is the cluster, which serializes the
// passes of one cluster. The lifecycle and interruption queues are not.

// MaxPodsPerMessage bounds a provision event: an ObjectRef is ~150 bytes of
// JSON, so 500 stay well inside Service Bus Standard's 256 KB message limit.
// A bigger window is split into several events.
const MaxPodsPerMessage = 500

// ProvisionPass is a provisioning pass the Functions ask for, due after
// `after` from now (rounded by Due; after <= 0: now). cause names who asks
// and keeps the askers' chains apart: "" for the Provisioner's own retry
// (ID provision/<cluster>/retry/<ms>), "after-termination" after a drain,
// "nodepool-ready" when a NodePool turned Ready (ID
// provision/<cluster>/<cause>/retry/<ms>). Two asks of one cause for one
// instant are one message.
func ProvisionPass(cluster, cause string, now time.Time, after time.Duration) Continuation {
	at := Due(now, after)
	base := "provision/" + cluster
	if cause != "" {
		base += "/" + cause
	}
	return scheduled(bus.QueueProvision, retryID(base, at), cluster, messages.TypeProvision, "retry", cluster, at,
		messages.Provision{Cluster: cluster, Pods: []messages.ObjectRef{}})
}

// ProvisionPods is the relay's provision events for one closed batch
// window of pods (sorted), split by MaxPodsPerMessage. The ID of each
// hashes its pods' UID and resourceVersion (provision/<hash>), so the same
// window observed twice is one message.
func ProvisionPods(cluster string, pods []messages.ObjectRef, now time.Time) ([]Continuation, error) {
	return provisionPods(cluster, pods, now, "provision/")
}

// ProvisionResync is the relay's periodic safety-net events for pods that
// are still unschedulable. Their content hash alone would equal the
// original window's and be dropped as a duplicate, so the ID also names
// the resync period (provision/resync/<period start, unix s>/<hash>):
// repeats within a period collapse, each new period triggers again.
func ProvisionResync(cluster string, pods []messages.ObjectRef, now time.Time, period time.Duration) ([]Continuation, error) {
	if period <= 0 {
		return nil, fmt.Errorf("resync period must be positive, got %s", period)
	}
	epoch := now.UTC().Truncate(period).Unix()
	return provisionPods(cluster, pods, now, "provision/resync/"+strconv.FormatInt(epoch, 10)+"/")
}

func provisionPods(cluster string, pods []messages.ObjectRef, now time.Time, prefix string) ([]Continuation, error) {
	if len(pods) == 0 {
		return nil, errors.New("provision event without pods")
	}
	var out []Continuation
	for start := 0; start < len(pods); start += MaxPodsPerMessage {
		chunk := pods[start:min(start+MaxPodsPerMessage, len(pods))]
		hash := sha256.New()
		for _, pod := range chunk {
			if pod.UID == "" || pod.Name == "" {
				return nil, fmt.Errorf("pod reference %s/%s (uid %q) lacks a name or UID", pod.Namespace, pod.Name, pod.UID)
			}
			fmt.Fprintf(hash, "%s:%s\n", pod.UID, pod.ResourceVersion)
		}
		// 32 hex characters (128 bits) keep the ID short and collision-free in practice.
		id := prefix + hex.EncodeToString(hash.Sum(nil))[:32]
		out = append(out, Continuation{queue: bus.QueueProvision, id: id, session: cluster, typ: messages.TypeProvision,
			subject: fmt.Sprintf("%d pods", len(chunk)), cluster: cluster, created: now,
			data: messages.Provision{Cluster: cluster, Pods: chunk}})
	}
	return out, nil
}

// NodeChanged is the relay's event for a Node that joined or changed
// readiness (node.Cluster, Name and UID required). The ID is
// node/<uid>/ready=<bool>, plus the Ready condition's transition time
// (readySince, unix seconds) when it has one: heartbeats do not change it
// (no spam on re-lists), while a node that flaps Ready→NotReady→Ready
// inside the duplicate-detection window still produces a new message for
// each transition. initInputs, when not empty, is a fingerprint of what
// else initialization reads (taints, extended resources) and ends the ID
// as /init=<initInputs>, so a device plugin registering its resources is a
// new message.
func NodeChanged(node messages.Node, readySince, now time.Time, initInputs string) (Continuation, error) {
	if node.UID == "" || node.Name == "" || node.Cluster == "" {
		return Continuation{}, fmt.Errorf("node %q (uid %q, cluster %q) lacks a name, UID or cluster", node.Name, node.UID, node.Cluster)
	}
	id := fmt.Sprintf("node/%s/ready=%t", node.UID, node.Ready)
	if !readySince.IsZero() {
		id += "/" + strconv.FormatInt(readySince.Unix(), 10)
	}
	if initInputs != "" {
		id += "/init=" + initInputs
	}
	return Continuation{queue: bus.QueueLifecycle, id: id, typ: messages.TypeNode, subject: node.Name, cluster: node.Cluster,
		created: now, data: node}, nil
}

// Interruption is the relay's event for a node whose PreemptionScheduled
// condition is True (Node, UID and Cluster required; Since is the
// condition's transition time). Its ID is
// node/<uid>/preemption/<transition time, unix s>/<hash of the message>:
// one message per notice however often the relay sees it (re-lists,
// heartbeats), a new one for a later or changed notice on the same node.
func Interruption(notice messages.Interruption, now time.Time) (Continuation, error) {
	if notice.UID == "" || notice.Node == "" || notice.Cluster == "" {
		return Continuation{}, fmt.Errorf("node %q (uid %q, cluster %q) lacks a name, UID or cluster", notice.Node, notice.UID, notice.Cluster)
	}
	sum := sha256.Sum256([]byte(notice.Message))
	id := fmt.Sprintf("node/%s/preemption/%d/%s", notice.UID, notice.Since.Unix(), hex.EncodeToString(sum[:])[:8])
	return Continuation{queue: bus.QueueInterruption, id: id, typ: messages.TypeInterruption, subject: notice.Node,
		cluster: notice.Cluster, created: now, data: notice}, nil
}

// NodeClaimDeleting says NodeClaim name (uid) is being deleted: start or
// continue its termination now (sent unscheduled). Its ID
// nodeclaim/<uid>/deleting is the same for the relay, Disruption and
// Interruption, so however many of them see the deletion, one Terminate
// chain runs.
func NodeClaimDeleting(cluster, name, uid string, now time.Time) Continuation {
	cont := nodeClaim(messages.TypeNodeClaimDeleting, "nodeclaim/"+uid+"/deleting", cluster, name, uid, now)
	cont.due = time.Time{}
	return cont
}

// TerminateRetry asks for Terminate to run again for NodeClaim name after
// `after` (a drain waiting on pods or a PDB, a VM delete under way, ARM
// throttling), due at Due(now, after) under
// nodeclaim/<uid>/deleting/retry/<ms>: chains started by several events
// merge from their second hop on.
func TerminateRetry(cluster, name, uid string, now time.Time, after time.Duration) Continuation {
	at := Due(now, after)
	return nodeClaim(messages.TypeNodeClaimDeleting, retryID("nodeclaim/"+uid+"/deleting", at), cluster, name, uid, at)
}

// Liveness is the check at time at that a launched NodeClaim registered:
// one per NodeClaim (nodeclaim/<uid>/liveness), so a launch repeated after
// a crash schedules it only once.
func Liveness(cluster, name, uid string, at time.Time) Continuation {
	return nodeClaim(messages.TypeNodeClaimLiveness, livenessID(uid), cluster, name, uid, at)
}

// LivenessRecheck is a liveness check that looks again at time at
// (nodeclaim/<uid>/liveness/retry/<ms>): not deduplicated against the
// first check.
func LivenessRecheck(cluster, name, uid string, at time.Time) Continuation {
	return nodeClaim(messages.TypeNodeClaimLiveness, retryID(livenessID(uid), at), cluster, name, uid, at)
}

func livenessID(uid string) string { return "nodeclaim/" + uid + "/liveness" }

// LaunchCheck is the look at NodeClaim name's VM create due at time at.
// Its ID is the NodeClaim's UID and that time
// (nodeclaim/<uid>/launch/<ms>), which the launch records on the
// NodeClaim: however often a check is re-sent (a redelivered message, a
// Provision pass reviving a stalled launch), one message per due time
// survives duplicate detection.
func LaunchCheck(cluster, name, uid string, at time.Time) Continuation {
	return nodeClaim(messages.TypeNodeClaimLaunch, fmt.Sprintf("nodeclaim/%s/launch/%d", uid, at.UnixMilli()), cluster, name, uid, at)
}

// FirstLaunchCheck is the first look at NodeClaim name's launch, due at
// time at. Its ID names no time (nodeclaim/<uid>/launch/first): the pass
// that created the NodeClaim and any pass that sees it before its launch
// recorded a state ask for the same message, so duplicate detection keeps
// one chain of checks per launch.
func FirstLaunchCheck(cluster, name, uid string, at time.Time) Continuation {
	return nodeClaim(messages.TypeNodeClaimLaunch, "nodeclaim/"+uid+"/launch/first", cluster, name, uid, at)
}

func nodeClaim(typ, id, cluster, name, uid string, at time.Time) Continuation {
	return scheduled(bus.QueueLifecycle, id, "", typ, name, cluster, at, messages.NodeClaim{Cluster: cluster, Name: name, UID: uid})
}

// DisruptionPass is a Disruption pass for cluster due at time at, asked
// for cause (for the log). Its ID disruption/<cluster>/<cause>/<ms> makes
// every ask of one cause for one instant one message.
func DisruptionPass(cluster, cause string, at time.Time) Continuation {
	return scheduled(bus.QueueDisruption, disruptionID(cluster, cause, at), cluster, messages.TypeDisruption, cause, cluster, at,
		messages.Disruption{Cluster: cluster, Cause: cause})
}

// DisruptionSlot is a Disruption pass asked for cause at now, due at the
// end of the slot of length slot that holds now (Due): every ask of one
// slot collapses into one message, so a burst of pod deletions costs one
// pass.
func DisruptionSlot(cluster, cause string, now time.Time, slot time.Duration) Continuation {
	at := Due(now, slot)
	return Continuation{queue: bus.QueueDisruption, id: disruptionID(cluster, cause, at), session: cluster, typ: messages.TypeDisruption,
		subject: cause, cluster: cluster, created: now, due: at, data: messages.Disruption{Cluster: cluster, Cause: cause}}
}

// PodEvents is the relay's Disruption event for pod events on nodes
// (sorted) up to at, flushed at now: the relay flushes once per slot, so
// the events of a slot are one message (disruption/<cluster>/pod-events/<ms
// of now>), delivered at once.
func PodEvents(cluster string, nodes []string, at, now time.Time) Continuation {
	const cause = "pod-events"
	return Continuation{queue: bus.QueueDisruption, id: disruptionID(cluster, cause, now), session: cluster, typ: messages.TypeDisruption,
		subject: cause, cluster: cluster, created: now,
		data: messages.Disruption{Cluster: cluster, Cause: cause, Nodes: nodes, PodEventTime: at.UTC()}}
}

func disruptionID(cluster, cause string, at time.Time) string {
	return fmt.Sprintf("disruption/%s/%s/%d", cluster, cause, at.UnixMilli())
}

// DisruptionValidate is the re-check of cmd, decided at now, after delay.
// commandID identifies the command (its method and candidates); the ID
// disruption/<cluster>/validate/<commandID>/<ms of Due(now, delay)> keeps
// one validation per command per slot: two passes that decide the same
// command collapse into one.
func DisruptionValidate(cmd messages.DisruptionCommand, commandID string, now time.Time, delay time.Duration) Continuation {
	at := now.Add(delay)
	id := fmt.Sprintf("disruption/%s/validate/%s/%d", cmd.Cluster, commandID, Due(now, delay).UnixMilli())
	return scheduled(bus.QueueDisruption, id, cmd.Cluster, messages.TypeDisruptionValidate, cmd.Method, cmd.Cluster, at, cmd)
}
