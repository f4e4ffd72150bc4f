package triggers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/internal/localbus"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// The MessageIds are a wire contract: Service Bus duplicate detection
// compares them across senders (relay and Functions) and across versions
// during a rolling upgrade, so every constructor's ID is pinned here,
// byte for byte, in the format the senders used before the constructors
// owned them.
func TestConstructorIDs(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 0, 1, 300e6, time.UTC) // 13:00:01.300
	at := now.Add(time.Minute)
	pods := []messages.ObjectRef{{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "7"}}
	batch, err := ProvisionPods("c", pods, now)
	if err != nil {
		t.Fatal(err)
	}
	resync, err := ProvisionResync("c", pods, now, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	node, err := NodeChanged(messages.Node{Cluster: "c", Name: "n", UID: "nu", Ready: true}, time.Unix(1700000000, 0), now, "")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := NodeChanged(messages.Node{Cluster: "c", Name: "n", UID: "nu"}, time.Time{}, now, "")
	if err != nil {
		t.Fatal(err)
	}
	notice, err := Interruption(messages.Interruption{Cluster: "c", Node: "n", UID: "nu", Message: "Preempt", Since: time.Unix(1700000000, 0)}, now)
	if err != nil {
		t.Fatal(err)
	}
	cmd := messages.DisruptionCommand{Cluster: "c", Method: "emptiness", Reason: "Empty", Candidates: []messages.ObjectRef{{Name: "a", UID: "u"}}}
	for _, tc := range []struct {
		name            string
		cont            Continuation
		id, queue, sess string
		typ             string
		due             time.Time // zero: unscheduled
	}{
		{"provisioner retry", ProvisionPass("c", "", now, 2*time.Second), "provision/c/retry/1796130002000", bus.QueueProvision, "c", messages.TypeProvision, Due(now, 2*time.Second)},
		{"provision after termination", ProvisionPass("c", "after-termination", now, time.Second), "provision/c/after-termination/retry/1796130002000", bus.QueueProvision, "c", messages.TypeProvision, Due(now, time.Second)},
		{"provision after a NodePool turned Ready", ProvisionPass("c", "nodepool-ready", now, 0), "provision/c/nodepool-ready/retry/1796130001300", bus.QueueProvision, "c", messages.TypeProvision, now},
		{"relay provision batch", batch[0], "provision/069ae386a3fc0ae7cf942fb53660c099", bus.QueueProvision, "c", messages.TypeProvision, time.Time{}},
		{"relay provision resync", resync[0], "provision/resync/1796130000/069ae386a3fc0ae7cf942fb53660c099", bus.QueueProvision, "c", messages.TypeProvision, time.Time{}},
		{"node ready", node, "node/nu/ready=true/1700000000", bus.QueueLifecycle, "", messages.TypeNode, time.Time{}},
		{"node without a Ready condition", fresh, "node/nu/ready=false", bus.QueueLifecycle, "", messages.TypeNode, time.Time{}},
		{"preemption notice", notice, "node/nu/preemption/1700000000/ee47a28a", bus.QueueInterruption, "", messages.TypeInterruption, time.Time{}},
		{"nodeclaim deleting", NodeClaimDeleting("c", "nc", "u", now), "nodeclaim/u/deleting", bus.QueueLifecycle, "", messages.TypeNodeClaimDeleting, time.Time{}},
		{"terminate retry", TerminateRetry("c", "nc", "u", now, 10*time.Second), "nodeclaim/u/deleting/retry/1796130010000", bus.QueueLifecycle, "", messages.TypeNodeClaimDeleting, Due(now, 10*time.Second)},
		{"liveness", Liveness("c", "nc", "u", at), "nodeclaim/u/liveness", bus.QueueLifecycle, "", messages.TypeNodeClaimLiveness, at},
		{"liveness recheck", LivenessRecheck("c", "nc", "u", at), "nodeclaim/u/liveness/retry/1796130061300", bus.QueueLifecycle, "", messages.TypeNodeClaimLiveness, at},
		{"launch check", LaunchCheck("c", "nc", "u", at), "nodeclaim/u/launch/1796130061300", bus.QueueLifecycle, "", messages.TypeNodeClaimLaunch, at},
		{"first launch check", FirstLaunchCheck("c", "nc", "u", at), "nodeclaim/u/launch/first", bus.QueueLifecycle, "", messages.TypeNodeClaimLaunch, at},
		{"disruption pass", DisruptionPass("c", "deadline", at), "disruption/c/deadline/1796130061300", bus.QueueDisruption, "c", messages.TypeDisruption, at},
		{"disruption slot", DisruptionSlot("c", "sweep", now, time.Minute), "disruption/c/sweep/1796130060000", bus.QueueDisruption, "c", messages.TypeDisruption, Due(now, time.Minute)},
		{"pod events", PodEvents("c", []string{"n"}, now, now), "disruption/c/pod-events/1796130001300", bus.QueueDisruption, "c", messages.TypeDisruption, time.Time{}},
		{"disruption validation", DisruptionValidate(cmd, "0123456789abcdef", now, 15*time.Second), "disruption/c/validate/0123456789abcdef/1796130015000", bus.QueueDisruption, "c", messages.TypeDisruptionValidate, now.Add(15 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) { checkContinuation(t, tc.cont, tc.id, tc.queue, tc.sess, tc.typ, tc.due) })
	}
}

// checkContinuation checks cont and the message it encodes to.
func checkContinuation(t *testing.T, cont Continuation, id, queue, session, typ string, due time.Time) {
	t.Helper()
	if cont.ID() != id || cont.Queue() != queue || cont.Type() != typ || !cont.Due().Equal(due) {
		t.Errorf("id %q queue %q type %q due %s; want %q %q %q %s", cont.ID(), cont.Queue(), cont.Type(), cont.Due(), id, queue, typ, due)
	}
	m, err := cont.Message(Source)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != id || m.SessionID != session || !m.ScheduledEnqueueTime.Equal(due) {
		t.Errorf("message id %q session %q scheduled %s; want %q %q %s", m.ID, m.SessionID, m.ScheduledEnqueueTime, id, session, due)
	}
	if m.ApplicationProperties[PropertyType] != typ || m.ApplicationProperties[PropertyCluster] != "c" {
		t.Errorf("properties %v; want type %s and cluster c", m.ApplicationProperties, typ)
	}
	ev, err := messages.Decode(m.Body)
	if err != nil || ev.ID != id || ev.Type != typ || ev.Source != Source {
		t.Errorf("body: %+v, %v", ev, err)
	}
}

// The batch hash depends on the pods' UIDs and resourceVersions only.
func TestProvisionPodsHash(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	one := []messages.ObjectRef{{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "7"}}
	first, _ := ProvisionPods("c", one, now)
	again, _ := ProvisionPods("c", one, now.Add(time.Hour))
	changed, _ := ProvisionPods("c", []messages.ObjectRef{{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "8"}}, now)
	if first[0].ID() != again[0].ID() || first[0].ID() == changed[0].ID() {
		t.Errorf("ids: %s, later %s, new resourceVersion %s", first[0].ID(), again[0].ID(), changed[0].ID())
	}
	if !strings.HasPrefix(first[0].ID(), "provision/") || len(first[0].ID()) != len("provision/")+32 {
		t.Errorf("id %s is not provision/ and 32 hex characters", first[0].ID())
	}
}

// A continuation nobody constructed, or one Service Bus would refuse, is
// an error, not a message with an empty or overlong MessageId.
func TestMessageRefusesBadContinuations(t *testing.T) {
	if _, err := (Continuation{}).Message(Source); err == nil || !strings.Contains(err.Error(), "not built by a constructor") {
		t.Errorf("zero continuation: %v", err)
	}
	long := strings.Repeat("c", 130)
	if _, err := DisruptionPass(long, "x", time.Now()).Message(Source); err == nil || !strings.Contains(err.Error(), "Service Bus allows at most") {
		t.Errorf("overlong id: %v", err)
	}
	if _, err := NodeChanged(messages.Node{Name: "n", UID: "u"}, time.Time{}, time.Now(), ""); err == nil {
		t.Error("a node event without a cluster was built")
	}
}

// Publish sends each continuation to its queue; duplicate detection keeps
// one of two continuations with one ID, whoever built them.
func TestPublishDeduplicates(t *testing.T) {
	ctx := context.Background()
	lb := localbus.New(localbus.Options{})
	for _, q := range []string{bus.QueueLifecycle, bus.QueueDisruption} {
		if err := lb.CreateQueue(q, localbus.QueueOptions{RequiresDuplicateDetection: true, RequiresSession: q == bus.QueueDisruption}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if err := Publish(ctx, lb, NodeClaimDeleting("c", "nc", "u", now), NodeClaimDeleting("c", "nc", "u", now.Add(time.Second)),
		DisruptionSlot("c", "x", now.Add(-time.Hour), time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d, err := lb.Receive(rctx, bus.QueueLifecycle)
	if err != nil {
		t.Fatal(err)
	}
	if d.Message.ID != "nodeclaim/u/deleting" {
		t.Errorf("lifecycle got %s", d.Message.ID)
	}
	if err := lb.Complete(d); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if d, err := lb.Receive(short, bus.QueueLifecycle); err == nil {
		t.Errorf("the duplicate %s was delivered too", d.Message.ID)
	}
	if err := Publish(ctx, nil, LaunchCheck("c", "nc", "u", now)); err != nil {
		t.Errorf("publishing without a publisher: %v", err)
	}
}
