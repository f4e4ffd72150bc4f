package events

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

var now = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func refs(n int, rv string) []messages.ObjectRef {
	out := make([]messages.ObjectRef, n)
	for i := range out {
		out[i] = messages.ObjectRef{Namespace: "ns", Name: fmt.Sprintf("p%04d", i), UID: fmt.Sprintf("uid-%d", i), ResourceVersion: rv}
	}
	return out
}

func decode[T any](t *testing.T, m bus.Message, wantType string) T {
	t.Helper()
	ev, err := messages.Decode(m.Body)
	if err != nil {
		t.Fatalf("body does not decode: %v", err)
	}
	if ev.Type != wantType || ev.ID != m.ID || ev.Source != "/karpfunc/relay/c1" {
		t.Fatalf("event type=%q id=%q source=%q; want %q, %q, /karpfunc/relay/c1", ev.Type, ev.ID, ev.Source, wantType, m.ID)
	}
	data, err := messages.DecodeData[T](ev)
	if err != nil {
		t.Fatalf("data does not decode strictly: %v", err)
	}
	return data
}

func TestProvision(t *testing.T) {
	b, err := NewBuilder("c1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		pods       []messages.ObjectRef
		wantChunks []int
		wantErr    string
	}{
		{name: "one pod", pods: refs(1, "1"), wantChunks: []int{1}},
		{name: "exactly one message worth", pods: refs(MaxPodsPerMessage, "1"), wantChunks: []int{MaxPodsPerMessage}},
		{name: "split into several", pods: refs(2*MaxPodsPerMessage+3, "1"), wantChunks: []int{MaxPodsPerMessage, MaxPodsPerMessage, 3}},
		{name: "no pods", pods: nil, wantErr: "provision event without pods"},
		{name: "pod without uid", pods: []messages.ObjectRef{{Namespace: "ns", Name: "p"}}, wantErr: `pod reference ns/p (uid "") lacks a name or UID`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, err := b.Provision(tt.pods, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Provision() = %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != len(tt.wantChunks) {
				t.Fatalf("got %d messages; want %d", len(msgs), len(tt.wantChunks))
			}
			var all []messages.ObjectRef
			seen := map[string]bool{}
			for i, m := range msgs {
				if m.SessionID != "c1" || m.ContentType != messages.ContentType || !strings.HasPrefix(m.ID, "provision/") || seen[m.ID] {
					t.Errorf("message %d: id=%q session=%q content type=%q", i, m.ID, m.SessionID, m.ContentType)
				}
				seen[m.ID] = true
				if m.ApplicationProperties[PropertyType] != messages.TypeProvision || m.ApplicationProperties[PropertyCluster] != "c1" {
					t.Errorf("message %d properties = %v", i, m.ApplicationProperties)
				}
				if len(m.Body) > 256<<10 {
					t.Errorf("message %d is %d bytes; Service Bus Standard takes 256 KB", i, len(m.Body))
				}
				data := decode[messages.Provision](t, m, messages.TypeProvision)
				if data.Cluster != "c1" || len(data.Pods) != tt.wantChunks[i] {
					t.Errorf("message %d: cluster %q, %d pods; want c1, %d", i, data.Cluster, len(data.Pods), tt.wantChunks[i])
				}
				all = append(all, data.Pods...)
			}
			if !reflect.DeepEqual(all, tt.pods) {
				t.Errorf("pods across messages differ from the input")
			}
		})
	}
}

func TestProvisionIDs(t *testing.T) {
	b := Builder{Cluster: "c1"}
	id := func(pods []messages.ObjectRef, at time.Time) string {
		t.Helper()
		m, err := b.Provision(pods, at)
		if err != nil {
			t.Fatal(err)
		}
		return m[0].ID
	}
	base := id(refs(3, "1"), now)
	if got := id(refs(3, "1"), now.Add(time.Hour)); got != base {
		t.Errorf("same pods later: id %q; want %q (time must not enter the id)", got, base)
	}
	if got := id(refs(3, "2"), now); got == base {
		t.Errorf("new resourceVersion kept id %q; want a new one", got)
	}
	if got := id(refs(2, "1"), now); got == base {
		t.Errorf("different pod set kept id %q", got)
	}

	resync := func(at time.Time) string {
		m, err := b.ProvisionResync(refs(3, "1"), at, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return m[0].ID
	}
	r1, r2, r3 := resync(now.Add(time.Second)), resync(now.Add(29*time.Second)), resync(now.Add(31*time.Second))
	if r1 != r2 {
		t.Errorf("resync ids within one period differ: %q, %q", r1, r2)
	}
	if r1 == r3 || r1 == base {
		t.Errorf("resync id %q must differ from the next period (%q) and the window's id (%q)", r1, r3, base)
	}
	if want := fmt.Sprintf("provision/resync/%d/", now.Unix()); !strings.HasPrefix(r1, want) {
		t.Errorf("resync id %q; want prefix %q", r1, want)
	}
	if _, err := b.ProvisionResync(refs(1, "1"), now, 0); err == nil {
		t.Error("ProvisionResync(period 0) = nil error")
	}
}

func node(ready *corev1.ConditionStatus, since time.Time) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}, Spec: corev1.NodeSpec{ProviderID: "azure:///x"}}
	if ready != nil {
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: *ready, LastTransitionTime: metav1.NewTime(since)},
		}
	}
	return n
}

func TestNode(t *testing.T) {
	b := Builder{Cluster: "c1"}
	tru, fal, unk := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	tests := []struct {
		name      string
		node      *corev1.Node
		wantID    string
		wantReady bool
		wantErr   string
	}{
		{name: "no ready condition yet", node: node(nil, time.Time{}), wantID: "node/u1/ready=false"},
		{name: "ready", node: node(&tru, now), wantID: fmt.Sprintf("node/u1/ready=true/%d", now.Unix()), wantReady: true},
		{name: "not ready", node: node(&fal, now), wantID: fmt.Sprintf("node/u1/ready=false/%d", now.Unix())},
		{name: "unknown is not ready", node: node(&unk, now.Add(time.Minute)), wantID: fmt.Sprintf("node/u1/ready=false/%d", now.Add(time.Minute).Unix())},
		{name: "no uid", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, wantErr: `node "n" (uid "") lacks a name or UID`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := b.Node(tt.node, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Node() = %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != tt.wantID || m.SessionID != "" {
				t.Errorf("id %q session %q; want %q and no session", m.ID, m.SessionID, tt.wantID)
			}
			got := decode[messages.Node](t, m, messages.TypeNode)
			want := messages.Node{Cluster: "c1", Name: "n1", UID: "u1", ProviderID: "azure:///x", Ready: tt.wantReady}
			if got != want {
				t.Errorf("data %+v; want %+v", got, want)
			}
		})
	}
}

func TestInterruption(t *testing.T) {
	b := Builder{Cluster: "c1"}
	at := metav1.NewTime(now)
	withCond := func(status corev1.ConditionStatus, msg string) *corev1.Node {
		n := node(nil, time.Time{})
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: PreemptionScheduled, Status: status,
			Reason: "SpotEvictionIncoming", Message: msg, LastTransitionTime: at})
		return n
	}
	const msg = "Preempt Scheduled: Tue, 01 Dec 2026 10:00:30 GMT."
	m, err := b.Interruption(withCond(corev1.ConditionTrue, msg), now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, fmt.Sprintf("node/u1/preemption/%d/", now.Unix())) || m.SessionID != "" {
		t.Errorf("id %q session %q", m.ID, m.SessionID)
	}
	again, _ := b.Interruption(withCond(corev1.ConditionTrue, msg), now.Add(time.Minute))
	other, _ := b.Interruption(withCond(corev1.ConditionTrue, "Preempt Started."), now)
	if again.ID != m.ID || other.ID == m.ID {
		t.Errorf("ids: same notice %q vs %q, changed notice %q", m.ID, again.ID, other.ID)
	}
	got := decode[messages.Interruption](t, m, messages.TypeInterruption)
	want := messages.Interruption{Cluster: "c1", Node: "n1", UID: "u1", ProviderID: "azure:///x", Reason: "SpotEvictionIncoming", Message: msg, Since: now.UTC()}
	if got != want {
		t.Errorf("data %+v; want %+v", got, want)
	}
	if _, err := b.Interruption(withCond(corev1.ConditionFalse, ""), now); err == nil {
		t.Error("an event for PreemptionScheduled=False")
	}
}

func TestNodeClaimDeleting(t *testing.T) {
	b := Builder{Cluster: "c1"}
	ts := metav1.NewTime(now)
	tests := []struct {
		name    string
		obj     metav1.Object
		wantErr string
	}{
		{name: "deleting", obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "nc1", UID: "u9", DeletionTimestamp: &ts}}},
		{name: "not deleting", obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "nc1", UID: "u9"}}, wantErr: "nodeclaim nc1 is not being deleted"},
		{name: "no uid", obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "nc1", DeletionTimestamp: &ts}}, wantErr: "lacks a name or UID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := b.NodeClaimDeleting(tt.obj, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NodeClaimDeleting() = %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != "nodeclaim/u9/deleting" {
				t.Errorf("id %q; want nodeclaim/u9/deleting", m.ID)
			}
			if got := decode[messages.NodeClaim](t, m, messages.TypeNodeClaimDeleting); got != (messages.NodeClaim{Cluster: "c1", Name: "nc1", UID: "u9"}) {
				t.Errorf("data %+v", got)
			}
		})
	}
}

func TestNewBuilder(t *testing.T) {
	for _, tt := range []struct {
		cluster, wantErr string
	}{
		{cluster: "prod-westeurope"},
		{cluster: "", wantErr: "cluster name is empty"},
		{cluster: strings.Repeat("c", 129), wantErr: "cluster name is 129 characters"},
	} {
		_, err := NewBuilder(tt.cluster)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("NewBuilder(%q) = %v; want %q", tt.cluster, err, tt.wantErr)
		}
	}
}

// TestInitInputs: a node's taints (but the node lifecycle controller's
// not-ready and unreachable ones) and extended resources' allocatable
// make its event ID change, so a device plugin registering GPUs or a
// startup taint going away is a new lifecycle message; cpu, memory and
// heartbeats are not.
func TestInitInputs(t *testing.T) {
	tru := corev1.ConditionTrue
	base := node(&tru, now)
	with := func(change func(*corev1.Node)) *corev1.Node {
		n := base.DeepCopy()
		change(n)
		return n
	}
	gpu := corev1.ResourceName("nvidia.com/gpu")
	b := Builder{Cluster: "c1"}
	id := func(n *corev1.Node) string {
		m, err := b.Node(n, now)
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	baseID := id(base)
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		changes bool
	}{
		{"GPUs registered", with(func(n *corev1.Node) { n.Status.Allocatable = corev1.ResourceList{gpu: *resourceQuantity("1")} }), true},
		{"startup taint", with(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
		}), true},
		{"not-ready taint", with(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
		}), false},
		{"cpu", with(func(n *corev1.Node) {
			n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity("2")}
		}), false},
	} {
		if got := id(tc.node) != baseID; got != tc.changes {
			t.Errorf("%s: ID %q vs %q; changed %v, want %v", tc.name, id(tc.node), baseID, got, tc.changes)
		}
	}
	if !strings.HasPrefix(id(with(func(n *corev1.Node) { n.Status.Allocatable = corev1.ResourceList{gpu: *resourceQuantity("1")} })), baseID+"/init=") {
		t.Errorf("the ID does not keep the Ready part before /init=")
	}
}

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
