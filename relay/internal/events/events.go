// Package events turns what the relay saw into bus messages: a CloudEvent
// body plus the Service Bus properties the consumers rely on, built by the
// constructors of pkg/triggers (which own every message's queue, session
// and ID). The message IDs are derived from the observed objects only,
// never from time or randomness, so a relay that restarts and re-lists the
// cluster produces the same IDs and Service Bus duplicate detection
// swallows the repeats.
package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// MaxPodsPerMessage bounds a provision event: an ObjectRef is ~150 bytes of
// JSON, so 500 stay well inside Service Bus Standard's 256 KB message limit.
// A bigger window is split into several events.
const MaxPodsPerMessage = triggers.MaxPodsPerMessage

// Application property names set on every message, so a consumer or an
// operator browsing a queue can route and filter without decoding the body.
const (
	PropertyType    = triggers.PropertyType
	PropertyCluster = triggers.PropertyCluster
)

// Builder builds the relay's messages for one cluster.
type Builder struct {
	// Cluster names the cluster in every payload and is the provision
	// SessionID, which serializes provisioning per cluster.
	Cluster string
	// Source is the CloudEvent source; empty means "/karpfunc/relay/<cluster>".
	Source string
}

// NewBuilder checks the cluster name against what Service Bus accepts as a
// SessionID.
func NewBuilder(cluster string) (Builder, error) {
	if cluster == "" {
		return Builder{}, errors.New("events: cluster name is empty")
	}
	if len(cluster) > bus.MaxIDLength {
		return Builder{}, fmt.Errorf("events: cluster name is %d characters; a Service Bus session ID allows at most %d", len(cluster), bus.MaxIDLength)
	}
	return Builder{Cluster: cluster}, nil
}

func (b Builder) source() string {
	if b.Source != "" {
		return b.Source
	}
	return triggers.RelaySource(b.Cluster)
}

// Provision builds the provision events for one closed batch window. pods must
// be sorted (batcher.Sort); the ID of each event hashes its pods' UID and
// resourceVersion, so the same window observed twice is one message.
func (b Builder) Provision(pods []messages.ObjectRef, now time.Time) ([]bus.Message, error) {
	conts, err := triggers.ProvisionPods(b.Cluster, pods, now)
	return b.messages(conts, err)
}

// ProvisionResync builds the periodic safety-net events for pods that are
// still unschedulable. Their content hash alone would equal the original
// window's and be dropped as a duplicate, so the ID also names the resync
// period (now truncated to period): repeats within a period collapse, each new
// period triggers again.
func (b Builder) ProvisionResync(pods []messages.ObjectRef, now time.Time, period time.Duration) ([]bus.Message, error) {
	conts, err := triggers.ProvisionResync(b.Cluster, pods, now, period)
	return b.messages(conts, err)
}

func (b Builder) messages(conts []triggers.Continuation, err error) ([]bus.Message, error) {
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	out := make([]bus.Message, 0, len(conts))
	for _, cont := range conts {
		msg, err := b.message(cont, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, msg)
	}
	return out, nil
}

// NodeReady reports whether the node's Ready condition is True, and that
// condition's last transition time (zero when there is none).
func NodeReady(n *corev1.Node) (bool, metav1.Time) {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, cond.LastTransitionTime
		}
	}
	return false, metav1.Time{}
}

// Node builds the event for a node that joined or changed readiness. The ID
// is node/<uid>/ready=<bool>, plus the Ready condition's transition time when
// it has one: heartbeats do not change it (no spam on re-lists), while a node
// that flaps Ready→NotReady→Ready inside the duplicate-detection window still
// produces a new message for each transition.
func (b Builder) Node(n *corev1.Node, now time.Time) (bus.Message, error) {
	if n.UID == "" || n.Name == "" {
		return bus.Message{}, fmt.Errorf("events: node %q (uid %q) lacks a name or UID", n.Name, n.UID)
	}
	ready, since := NodeReady(n)
	return b.message(triggers.NodeChanged(messages.Node{
		Cluster: b.Cluster, Name: n.Name, UID: string(n.UID), ProviderID: n.Spec.ProviderID, Ready: ready,
	}, since.Time, now, InitInputs(n)))
}

// ExtendedResource says whether name is an extended resource (a device
// plugin's, such as nvidia.com/gpu), not cpu, memory, pods, storage or
// hugepages.
func ExtendedResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return false
	}
	return !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// InitInputs is what, besides Ready, decides whether a node is
// initialized and that changes after it is Ready: its taints (startup
// taints removed by their owners) and its extended resources' allocatable
// (a device plugin registering GPUs), as a short fingerprint ("" for
// none). Known ephemeral taints (Karpenter's list) are left out. A change is a node event, so initialization looks again.
func InitInputs(n *corev1.Node) string {
	var parts []string
	for _, taint := range n.Spec.Taints {
		// The node lifecycle controller's not-ready and unreachable
		// taints come and go with Ready, which is in the ID already.
		if !scheduling.IsKnownEphemeralTaint(&taint) {
			parts = append(parts, "t:"+taint.ToString())
		}
	}
	for name, quantity := range n.Status.Allocatable {
		if ExtendedResource(name) {
			parts = append(parts, "a:"+string(name)+"="+quantity.String())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, ",")))
	return hex.EncodeToString(sum[:])[:8]
}

// NodeClaimDeleting builds the event for a NodeClaim that has a deletion
// timestamp; its ID nodeclaim/<uid>/deleting is the same however often the
// relay sees it.
func (b Builder) NodeClaimDeleting(nc metav1.Object, now time.Time) (bus.Message, error) {
	if nc.GetUID() == "" || nc.GetName() == "" {
		return bus.Message{}, fmt.Errorf("events: nodeclaim %q (uid %q) lacks a name or UID", nc.GetName(), nc.GetUID())
	}
	if nc.GetDeletionTimestamp() == nil {
		return bus.Message{}, fmt.Errorf("events: nodeclaim %s is not being deleted", nc.GetName())
	}
	return b.message(triggers.NodeClaimDeleting(b.Cluster, nc.GetName(), string(nc.GetUID()), now), nil)
}

// Disruption builds the "look again" event for the Disruption function:
// cause says what happened (pods left nodes, a NodePool changed). Every
// event of one cause in one slot of length slot has the same ID and is
// delivered at the slot's end, so a burst of pod deletions is one pass.
func (b Builder) Disruption(cause string, now time.Time, slot time.Duration) (bus.Message, error) {
	return b.message(triggers.DisruptionSlot(b.Cluster, cause, now, slot), nil)
}

// ProvisionPass builds a provisioning pass due now for cause (a
// CapacityBuffer changed); passes asked in the same instant are one.
func (b Builder) ProvisionPass(cause string, now time.Time) (bus.Message, error) {
	return b.message(triggers.ProvisionPass(b.Cluster, cause, now, 0), nil)
}

// PodEvents builds the Disruption event for pod events on nodes (sorted)
// up to at, flushed at now (the relay flushes once per slot, so the events
// of a slot are one message).
func (b Builder) PodEvents(nodes []string, at, now time.Time) (bus.Message, error) {
	return b.message(triggers.PodEvents(b.Cluster, nodes, at, now), nil)
}

// PreemptionScheduled is the node condition AKS's node-problem-detector sets
// when the VM's Scheduled Events announce a spot preemption.
const PreemptionScheduled corev1.NodeConditionType = "PreemptionScheduled"

// Preemption returns the node's PreemptionScheduled condition when it is
// True.
func Preemption(n *corev1.Node) (corev1.NodeCondition, bool) {
	for _, cond := range n.Status.Conditions {
		if cond.Type == PreemptionScheduled {
			return cond, cond.Status == corev1.ConditionTrue
		}
	}
	return corev1.NodeCondition{}, false
}

// Interruption builds the event for a node whose PreemptionScheduled
// condition is True, for the interruption queue. Its ID is
// node/<uid>/preemption/<transition time>/<message hash>: one message per
// notice however often the relay sees it (re-lists, heartbeats), a new one
// for a later or changed notice on the same node.
func (b Builder) Interruption(n *corev1.Node, now time.Time) (bus.Message, error) {
	if n.UID == "" || n.Name == "" {
		return bus.Message{}, fmt.Errorf("events: node %q (uid %q) lacks a name or UID", n.Name, n.UID)
	}
	cond, ok := Preemption(n)
	if !ok {
		return bus.Message{}, fmt.Errorf("events: node %s has no PreemptionScheduled=True condition", n.Name)
	}
	return b.message(triggers.Interruption(messages.Interruption{
		Cluster: b.Cluster, Node: n.Name, UID: string(n.UID), ProviderID: n.Spec.ProviderID,
		Reason: cond.Reason, Message: cond.Message, Since: cond.LastTransitionTime.UTC(),
	}, now))
}

// message encodes cont from the relay's source; err is the constructor's.
func (b Builder) message(cont triggers.Continuation, err error) (bus.Message, error) {
	if err != nil {
		return bus.Message{}, fmt.Errorf("events: %w", err)
	}
	if b.Cluster == "" {
		return bus.Message{}, errors.New("events: builder has no cluster name")
	}
	msg, err := cont.Message(b.source())
	if err != nil {
		return bus.Message{}, fmt.Errorf("events: %w", err)
	}
	return msg, nil
}
