package watch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/internal/tools"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/relay/chart"
	"github.com/karpfunc/karpfunc/relay/internal/watch"
)

var kubeAdminConfig *rest.Config

// recorder is an in-memory bus.Publisher: a real implementation of our own
// interface that keeps what it was given, validated like the real ones.
type recorder struct {
	mu   sync.Mutex
	sent []sent
}

type sent struct {
	queue string
	msg   bus.Message
	ev    messages.CloudEvent
}

func (r *recorder) Publish(_ context.Context, queue string, msgs ...bus.Message) error {
	if err := bus.ValidateMessages(queue, msgs); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		ev, err := messages.Decode(m.Body)
		if err != nil {
			return err
		}
		r.sent = append(r.sent, sent{queue: queue, msg: m, ev: ev})
	}
	return nil
}

func (r *recorder) Close(context.Context) error { return nil }

func (r *recorder) all() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.sent...)
}

// waitFor returns the first recorded message matching match.
func (r *recorder) waitFor(t *testing.T, what string, match func(sent) bool) sent {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range r.all() {
			if match(s) {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ids []string
	for _, s := range r.all() {
		ids = append(ids, s.queue+":"+s.msg.ID)
	}
	t.Fatalf("no %s published; got %v", what, ids)
	return sent{}
}

func startControlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root, err := tools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := tools.EnsureBinaries(t.Context(), root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	var log io.Writer
	if os.Getenv("KARPFUNC_CONTROLPLANE_LOG") != "" {
		log = os.Stderr
	}
	cp, err := controlplane.Start(t.Context(), controlplane.Options{BinDir: binDir, InstallCRDs: true, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	return cp
}

// relayIdentity installs the chart's ClusterRole (templates/clusterrole.yaml
// with the template lines removed), binds it to a ServiceAccount and returns
// a config that impersonates that ServiceAccount.
func relayIdentity(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) *rest.Config {
	t.Helper()
	// The ClusterRole exactly as `helm install` renders it.
	objs, err := chart.Render("karpfunc", "karpfunc", map[string]any{"clusterName": "test-cluster", "localBusURL": "http://127.0.0.1:1",
		"functions": map[string]any{"principalId": "0000c0de-0000-4000-8000-00000000f0b1"}})
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "-relay") {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(role.Rules) == 0 {
		t.Fatal("the chart renders no relay ClusterRole")
	}
	for _, rule := range role.Rules {
		for _, v := range rule.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Fatalf("chart ClusterRole grants %v on %v; the relay must only read", rule.Verbs, rule.Resources)
			}
		}
	}
	role.ObjectMeta = metav1.ObjectMeta{}
	role.Name = "karpfunc-relay"
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "relay"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "karpfunc-relay"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "karpfunc-relay"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "relay", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":relay"
	waitAuthorized(t, ctx, kube, user, role)
	cfg := rest.CopyConfig(kubeAdminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	// Sanity: the identity can really not write.
	deny := kubernetes.NewForConfigOrDie(cfg)
	if _, err := deny.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "forbidden"}}, metav1.CreateOptions{}); err == nil {
		t.Fatal("the relay identity could create a node")
	}
	return cfg
}

// waitAuthorized waits until the API server's authorizer, whose RBAC
// cache follows new bindings a moment later (seen on a loaded machine: the
// relay's first LIST forbidden), allows user every verb role grants.
func waitAuthorized(t *testing.T, ctx context.Context, kube kubernetes.Interface, user string, role *rbacv1.ClusterRole) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, rule := range role.Rules {
		for _, resource := range rule.Resources {
			attrs := &authorizationv1.ResourceAttributes{Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: resource}
			for {
				review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
					Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs}}, metav1.CreateOptions{})
				if err == nil && review.Status.Allowed {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s is still not allowed to %s %s.%s 30s after the binding (err %v)", user, attrs.Verb, resource, attrs.Group, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

func unschedulable(t *testing.T, ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()}}
	out, err := kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("marking %s unschedulable: %v", pod.Name, err)
	}
	return out
}

func provisionPods(t *testing.T, s sent) []messages.ObjectRef {
	t.Helper()
	data, err := messages.DecodeData[messages.Provision](s.ev)
	if err != nil {
		t.Fatal(err)
	}
	if data.Cluster != "test-cluster" {
		t.Fatalf("provision cluster %q; want test-cluster", data.Cluster)
	}
	return data.Pods
}

// TestRelay drives the relay's watch→publish path against a real
// kube-apiserver: the test plays kube-scheduler and the kubelet by writing
// pod and node status itself.
func TestRelay(t *testing.T) {
	cp := startControlPlane(t)
	cfg := cp.RESTConfig()
	kubeAdminConfig = cfg
	kube := kubernetes.NewForConfigOrDie(cfg)
	meta := metadata.NewForConfigOrDie(cfg)
	c, err := client.New(cfg, client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// Without kube-controller-manager nobody creates the default
	// ServiceAccount that pod admission requires.
	ns := "relay-test"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The relay runs as a ServiceAccount bound to the chart's own ClusterRole,
	// so this test also proves the chart's read-only RBAC is enough.
	relayCfg := relayIdentity(t, ctx, kube, ns)
	relayKube := kubernetes.NewForConfigOrDie(relayCfg)
	relayMeta := metadata.NewForConfigOrDie(relayCfg)

	rec := &recorder{}
	relayCtx, stop := context.WithCancel(ctx)
	synced := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- watch.Run(relayCtx, watch.Options{
			Cluster: "test-cluster", Kube: relayKube, Metadata: relayMeta, Publisher: rec,
			BatchIdleDuration: 2 * time.Second, BatchMaxDuration: 8 * time.Second, Resync: 3 * time.Second,
			RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 100 * time.Millisecond,
			// One worker and a recorder that never fails: messages are
			// recorded in the order the handlers sent them, so a marker
			// event proves every event before it was handled, and an event
			// that should not exist would be recorded before the marker.
			SendWorkers: 1,
			Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
			OnSynced:    func() { close(synced) },
		})
	}()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run() = %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after cancel")
		}
	}()
	select {
	case <-synced:
	case err := <-done:
		t.Fatalf("Run() returned before syncing: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("relay informers did not sync")
	}

	t.Run("unschedulable pods are batched into one provision event", func(t *testing.T) {
		newPod := func(name string) *corev1.Pod {
			p, err := kube.CoreV1().Pods(ns).Create(ctx, testfixtures.Pod(testfixtures.PodOptions{Name: name, Namespace: ns}), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		a, b, waiting := newPod("a"), newPod("b"), newPod("waiting")
		// A pending pod the scheduler has not judged is not a trigger. The
		// barrier: a marker pod made unschedulable after them goes through
		// the same informer and batcher, so its provision event is
		// recorded after (or holds) any event the pending pods caused.
		marker := unschedulable(t, ctx, kube, newPod("marker"))
		rec.waitFor(t, "provision event for the marker pod", func(s sent) bool {
			return s.queue == bus.QueueProvision && slices.ContainsFunc(provisionPods(t, s), func(p messages.ObjectRef) bool { return p.UID == string(marker.UID) })
		})
		for _, s := range rec.all() {
			if s.queue != bus.QueueProvision {
				continue
			}
			if pods := provisionPods(t, s); len(pods) != 1 || pods[0].UID != string(marker.UID) {
				t.Fatalf("provision event %s holds %+v; want only the marker pod: the others are merely pending", s.msg.ID, pods)
			}
		}
		if err := kube.CoreV1().Pods(ns).Delete(ctx, marker.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		seen := len(rec.all())
		a = unschedulable(t, ctx, kube, a)
		b = unschedulable(t, ctx, kube, b)

		s := rec.waitFor(t, "provision event", func(s sent) bool {
			return s.queue == bus.QueueProvision && strings.HasPrefix(s.msg.ID, "provision/") && !strings.HasPrefix(s.msg.ID, "provision/resync/") &&
				!slices.ContainsFunc(rec.all()[:seen], func(before sent) bool { return before.msg.ID == s.msg.ID })
		})
		want := []messages.ObjectRef{
			{Namespace: ns, Name: "a", UID: string(a.UID), ResourceVersion: a.ResourceVersion},
			{Namespace: ns, Name: "b", UID: string(b.UID), ResourceVersion: b.ResourceVersion},
		}
		if got := provisionPods(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("provision pods = %+v; want %+v (one window with both)", got, want)
		}
		if s.msg.SessionID != "test-cluster" || s.msg.ContentType != messages.ContentType || s.ev.Type != messages.TypeProvision {
			t.Fatalf("provision message session=%q contentType=%q type=%q", s.msg.SessionID, s.msg.ContentType, s.ev.Type)
		}

		// The safety net re-announces what is still unschedulable; a pod
		// that got deleted drops out of it.
		if err := kube.CoreV1().Pods(ns).Delete(ctx, "b", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		r := rec.waitFor(t, "resync event with only pod a", func(s sent) bool {
			if !strings.HasPrefix(s.msg.ID, "provision/resync/") {
				return false
			}
			pods := provisionPods(t, s)
			return len(pods) == 1 && pods[0].UID == string(a.UID)
		})
		if r.queue != bus.QueueProvision || r.msg.SessionID != "test-cluster" {
			t.Fatalf("resync went to %s with session %q", r.queue, r.msg.SessionID)
		}
		for _, s := range rec.all() {
			if s.queue == bus.QueueProvision {
				for _, p := range provisionPods(t, s) {
					if p.UID == string(waiting.UID) {
						t.Fatalf("pod %q without an Unschedulable condition was published in %s", p.Name, s.msg.ID)
					}
				}
			}
		}
	})

	t.Run("pod events on nodes and NodePool changes ask for a disruption pass", func(t *testing.T) {
		p, err := kube.CoreV1().Pods(ns).Create(ctx, testfixtures.Pod(testfixtures.PodOptions{Name: "bound", Namespace: ns, NodeName: "node-busy"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := rec.waitFor(t, "pod-events disruption event for node-busy", func(s sent) bool {
			return s.queue == bus.QueueDisruption && strings.Contains(s.msg.ID, "/pod-events/")
		})
		data, err := messages.DecodeData[messages.Disruption](s.ev)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(data.Nodes, []string{"node-busy"}) || data.PodEventTime.IsZero() || s.msg.SessionID != "test-cluster" {
			t.Fatalf("disruption event nodes %v at %s session %q; want [node-busy], a time, session test-cluster", data.Nodes, data.PodEventTime, s.msg.SessionID)
		}
		first := s.msg.ID
		if err := kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "a second pod-events event for the deletion", func(s sent) bool {
			return s.queue == bus.QueueDisruption && strings.Contains(s.msg.ID, "/pod-events/") && s.msg.ID != first
		})

		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "changing"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
			Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}}}}}
		if err := c.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
		// A new NodePool asks for a pass that writes its status, not a
		// drift pass.
		rec.waitFor(t, "spec-added disruption event", func(s sent) bool {
			return s.queue == bus.QueueDisruption && strings.Contains(s.msg.ID, "/spec-added/")
		})
		for _, s := range rec.all() {
			if strings.Contains(s.msg.ID, "/spec-changed/") {
				t.Fatalf("a new NodePool asked for a drift pass (%s)", s.msg.ID)
			}
		}
		np.Spec.Template.Labels = map[string]string{"tier": "two"}
		if err := c.Update(ctx, np); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "spec-changed disruption event", func(s sent) bool {
			return s.queue == bus.QueueDisruption && strings.Contains(s.msg.ID, "/spec-changed/") && !s.msg.ScheduledEnqueueTime.IsZero()
		})
	})

	t.Run("a NodeOverlay change asks for a disruption pass", func(t *testing.T) {
		seen := map[string]bool{}
		for _, s := range rec.all() {
			seen[s.msg.ID] = true
		}
		price := "0.5"
		overlay := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "reserved"}, Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D4s_v5"}}},
			Price:        &price}}
		if err := c.Create(ctx, overlay); err != nil {
			t.Fatal(err)
		}
		// Changes of one cause within one slot share one message: change
		// the overlay until a slot the NodePool's change did not take
		// carries a new one.
		deadline := time.Now().Add(30 * time.Second)
		for weight := int32(1); ; weight++ {
			if slices.ContainsFunc(rec.all(), func(s sent) bool {
				return s.queue == bus.QueueDisruption && strings.Contains(s.msg.ID, "/spec-changed/") && !seen[s.msg.ID]
			}) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new spec-changed disruption event after changing NodeOverlay reserved %d times", weight-1)
			}
			overlay.Spec.Weight = &weight
			if err := c.Update(ctx, overlay); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
	})

	t.Run("a CapacityBuffer's spec change asks for a provisioning pass, its status write does not", func(t *testing.T) {
		buffers := func() []sent {
			var out []sent
			for _, s := range rec.all() {
				if s.queue == bus.QueueProvision && strings.Contains(s.msg.ID, "/capacity-buffer/") {
					out = append(out, s)
				}
			}
			return out
		}
		one := int32(1)
		cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: ns},
			Spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "shape"}, Replicas: &one}}
		if err := c.Create(ctx, cb); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "capacity-buffer provision event", func(s sent) bool {
			return s.queue == bus.QueueProvision && strings.Contains(s.msg.ID, "/capacity-buffer/")
		})
		created := len(buffers())
		cb.Status.Replicas = &one
		if err := c.Status().Update(ctx, cb); err != nil {
			t.Fatal(err)
		}
		// A Node's join event is the marker: events are recorded in the
		// order they were handled, so one from the status write would come
		// before it.
		marker, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "buffer-marker"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "the marker node's join event", func(s sent) bool { return s.msg.ID == fmt.Sprintf("node/%s/ready=false", marker.UID) })
		if got := len(buffers()); got != created {
			t.Fatalf("%d capacity-buffer events after a status write, want %d: the status write asked for a pass", got, created)
		}
		two := int32(2)
		cb.Spec.Replicas = &two
		if err := c.Update(ctx, cb); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "a second capacity-buffer provision event for the spec change", func(sent) bool { return len(buffers()) > created })
	})

	t.Run("node join and ready transition", func(t *testing.T) {
		n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{ProviderID: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		joined := rec.waitFor(t, "node joined event", func(s sent) bool { return s.msg.ID == fmt.Sprintf("node/%s/ready=false", n.UID) })
		data, err := messages.DecodeData[messages.Node](joined.ev)
		if err != nil {
			t.Fatal(err)
		}
		if joined.queue != bus.QueueLifecycle || data != (messages.Node{Cluster: "test-cluster", Name: "node-1", UID: string(n.UID), ProviderID: n.Spec.ProviderID}) {
			t.Fatalf("node joined: queue %s data %+v", joined.queue, data)
		}

		since := metav1.NewTime(time.Now().Truncate(time.Second))
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: since, LastTransitionTime: since}}
		if n, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		readyID := fmt.Sprintf("node/%s/ready=true/%d", n.UID, since.Unix())
		ready := rec.waitFor(t, "node ready event", func(s sent) bool { return s.msg.ID == readyID })
		if data, _ := messages.DecodeData[messages.Node](ready.ev); !data.Ready {
			t.Fatalf("ready event data %+v", data)
		}

		// A heartbeat that changes no readiness is not an event. The
		// barrier: a node added after it goes through the same informer,
		// so its joined event is recorded after any event the heartbeat
		// caused.
		n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(since.Add(10 * time.Second))
		if _, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		marker, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-marker"}, Spec: corev1.NodeSpec{ProviderID: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/marker"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "joined event of the marker node", func(s sent) bool { return s.msg.ID == fmt.Sprintf("node/%s/ready=false", marker.UID) })
		count := 0
		for _, s := range rec.all() {
			if strings.HasPrefix(s.msg.ID, "node/"+string(n.UID)) {
				count++
			}
		}
		if count != 2 {
			t.Fatalf("%d node events for node-1; want 2 (joined, ready)", count)
		}
	})

	t.Run("nodeclaim deletion", func(t *testing.T) {
		nc := &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "nc-1", Finalizers: []string{karpv1.TerminationFinalizer}},
			Spec: karpv1.NodeClaimSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
			},
		}
		if err := c.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		// A nodeclaim that is not being deleted is not an event. The
		// barrier: its deletion goes through the same informer, so its
		// deleting event is recorded after any event the creation caused.
		if err := c.Delete(ctx, nc); err != nil {
			t.Fatal(err)
		}
		s := rec.waitFor(t, "nodeclaim deleting event", func(s sent) bool { return s.msg.ID == "nodeclaim/"+string(nc.UID)+"/deleting" })
		var claimEvents []string
		for _, s := range rec.all() {
			if strings.HasPrefix(s.msg.ID, "nodeclaim/") {
				claimEvents = append(claimEvents, s.msg.ID)
			}
		}
		if len(claimEvents) != 1 {
			t.Fatalf("nodeclaim events %v; want the one deleting event, none while the nodeclaim was not being deleted", claimEvents)
		}
		data, err := messages.DecodeData[messages.NodeClaim](s.ev)
		if err != nil {
			t.Fatal(err)
		}
		if s.queue != bus.QueueLifecycle || s.ev.Type != messages.TypeNodeClaimDeleting || data != (messages.NodeClaim{Cluster: "test-cluster", Name: "nc-1", UID: string(nc.UID)}) {
			t.Fatalf("nodeclaim event queue %s type %s data %+v", s.queue, s.ev.Type, data)
		}
	})

	t.Run("a relay that may not list nodeclaims fails with the reason", func(t *testing.T) {
		bad := rest.CopyConfig(cfg)
		bad.BearerToken = "not-a-valid-token"
		bad.BearerTokenFile = ""
		err := watch.Run(ctx, watch.Options{Cluster: "test-cluster", Kube: kube, Metadata: metadata.NewForConfigOrDie(bad), Publisher: rec})
		if err == nil || !strings.Contains(err.Error(), "listing nodeclaims.karpenter.sh") || !strings.Contains(err.Error(), "Unauthorized") {
			t.Fatalf("Run() = %v; want an Unauthorized error naming nodeclaims.karpenter.sh", err)
		}
	})

	t.Run("invalid options", func(t *testing.T) {
		for _, tt := range []struct {
			opts watch.Options
			want string
		}{
			{opts: watch.Options{Kube: kube, Metadata: meta, Publisher: rec}, want: "cluster name is empty"},
			{opts: watch.Options{Cluster: "c", Metadata: meta, Publisher: rec}, want: "kubernetes client is nil"},
			{opts: watch.Options{Cluster: "c", Kube: kube, Metadata: meta}, want: "publisher is nil"},
			{opts: watch.Options{Cluster: "c", Kube: kube, Metadata: meta, Publisher: rec, BatchIdleDuration: time.Minute}, want: "idle duration 1m0s is longer than max duration 10s"},
			{opts: watch.Options{Cluster: "c", Kube: kube, Metadata: meta, Publisher: rec, Resync: -time.Second}, want: "resync period must be positive"},
		} {
			if err := watch.Run(ctx, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run() = %v; want %q", err, tt.want)
			}
		}
	})

	// Every message the relay produced is one a real bus accepts.
	for _, s := range rec.all() {
		if err := bus.ValidateMessages(s.queue, []bus.Message{s.msg}); err != nil {
			t.Error(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(s.msg.Body, &raw); err != nil || raw["source"] != "/karpfunc/relay/test-cluster" {
			t.Errorf("message %s body source %v (%v)", s.msg.ID, raw["source"], err)
		}
	}
}
