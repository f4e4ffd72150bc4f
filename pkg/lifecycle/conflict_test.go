package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/ownership"
)

// interferer is a concurrent writer on the wire: just before the nth PATCH
// to path reaches the API server, it performs its own write to the same
// object through another client. The PATCH then carries a resourceVersion
// that is no longer current, exactly as when a kubelet heartbeat or another
// delivery wins the race between the controller's read and its write.
type interferer struct {
	rt    http.RoundTripper
	path  string
	nth   int
	write func(ctx context.Context) error

	mu    sync.Mutex
	seen  int
	fired bool
	err   error
}

func (i *interferer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && req.URL.Path == i.path {
		i.mu.Lock()
		i.seen++
		if i.seen == i.nth {
			i.fired = true
			i.err = i.write(req.Context())
		}
		i.mu.Unlock()
	}
	return i.rt.RoundTrip(req)
}

// interfered returns a client whose nth PATCH to path is preceded by write.
func (w *world) interfered(t *testing.T, path string, nth int, write func(ctx context.Context) error) (client.Client, *interferer) {
	t.Helper()
	in := &interferer{path: path, nth: nth, write: write}
	cfg := rest.CopyConfig(w.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { in.rt = rt; return in })
	kube, err := client.New(cfg, client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kube, in
}

// update re-reads obj through the test's own client and writes mutate's
// change (status: through the status subresource).
func update[T client.Object](ctx context.Context, kube client.Client, obj T, status bool, mutate func(T)) error {
	if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	mutate(obj)
	if status {
		return kube.Status().Update(ctx, obj)
	}
	return kube.Update(ctx, obj)
}

// joiningNode creates a launched NodeClaim and its Node, Ready and still
// carrying the unregistered taint: what NodeChanged sees when a VM joins.
func (w *world) joiningNode(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	providerID := "azure:///subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/" + name
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "np", "team": "a"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable,
				Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D2s_v5"}}}}}
	ownership.Mark(nc)
	if err := w.kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = providerID
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	if err := w.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{ProviderID: providerID, Taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}}}
	if err := w.kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}
	if err := w.kube.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// TestNodeChangedConflict: a concurrent write to the Node or the NodeClaim
// between NodeChanged's read and each of its four writes (registration sync
// of the Node, Registered, the initialized label, Initialized) is absorbed
// inside the call: it re-reads, decides again and writes with the new
// resourceVersion, keeping the concurrent change. Before, each such race
// failed the invocation and cost a redelivery.
func TestNodeChangedConflict(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	labelNode := func(name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			return update(ctx, w.kube, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, false, func(n *corev1.Node) {
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels["concurrent"] = "yes"
			})
		}
	}
	writeImageID := func(name string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			return update(ctx, w.kube, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}, true, func(nc *karpv1.NodeClaim) {
				nc.Status.ImageID = "concurrent-image"
			})
		}
	}
	for i, c := range []struct {
		name string
		// path (with %s for the object name) and which PATCH to it the
		// concurrent write precedes.
		path  string
		nth   int
		write func(name string) func(ctx context.Context) error
		// initialized: the call ends with the NodeClaim Initialized.
		initialized bool
		// kept checks that the concurrent write survived.
		kept func(node *corev1.Node, nc *karpv1.NodeClaim) string
	}{
		{
			name: "a label written on the Node before the registration sync", path: "/api/v1/nodes/%s", nth: 1,
			write: labelNode, initialized: true,
			kept: func(n *corev1.Node, _ *karpv1.NodeClaim) string { return n.Labels["concurrent"] },
		},
		{
			name: "the NodeClaim's status written before Registered", path: "/apis/karpenter.sh/v1/nodeclaims/%s/status", nth: 1,
			write: writeImageID, initialized: true,
			kept: func(_ *corev1.Node, nc *karpv1.NodeClaim) string { return nc.Status.ImageID },
		},
		{
			name: "a label written on the Node before the initialized label", path: "/api/v1/nodes/%s", nth: 2,
			write: labelNode, initialized: true,
			kept: func(n *corev1.Node, _ *karpv1.NodeClaim) string { return n.Labels["concurrent"] },
		},
		{
			name: "the NodeClaim's status written before Initialized", path: "/apis/karpenter.sh/v1/nodeclaims/%s/status", nth: 2,
			write: writeImageID, initialized: true,
			kept: func(_ *corev1.Node, nc *karpv1.NodeClaim) string { return nc.Status.ImageID },
		},
		{
			// The re-read Node is judged again: no initialized label on a
			// Node that is no longer Ready.
			name: "the Node went NotReady before the initialized label", path: "/api/v1/nodes/%s", nth: 2,
			write: func(name string) func(ctx context.Context) error {
				return func(ctx context.Context) error {
					return update(ctx, w.kube, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, true, func(n *corev1.Node) {
						n.Status.Conditions[0].Status = corev1.ConditionFalse
					})
				}
			},
			initialized: false,
			kept: func(n *corev1.Node, _ *karpv1.NodeClaim) string {
				if n.Status.Conditions[0].Status == corev1.ConditionFalse {
					return "NotReady"
				}
				return ""
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("join-%d-%d", i, time.Now().UnixNano()%1e6)
			w.joiningNode(t, ctx, name)
			kube, in := w.interfered(t, fmt.Sprintf(c.path, name), c.nth, c.write(name))
			lc := lifecycle.New(lifecycle.Options{Kube: kube, Logger: slog.New(slog.DiscardHandler)})

			res, err := lc.NodeChanged(ctx, name)
			if !in.fired || in.err != nil {
				t.Fatalf("the concurrent write did not happen (fired=%t, %d PATCHes to %s): %v", in.fired, in.seen, in.path, in.err)
			}
			if err != nil {
				t.Fatalf("NodeChanged = %+v, %v; want it to converge in one call despite the conflict", res, err)
			}
			if !res.Registered || res.Initialized != c.initialized {
				t.Fatalf("NodeChanged = %+v; want registered, initialized=%t", res, c.initialized)
			}
			node, nc := &corev1.Node{}, &karpv1.NodeClaim{}
			if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
				t.Fatal(err)
			}
			if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
				t.Fatal(err)
			}
			if c.kept(node, nc) == "" {
				t.Errorf("the concurrent write was clobbered: node labels %v, status %+v; nodeclaim imageID %q",
					node.Labels, node.Status.Conditions, nc.Status.ImageID)
			}
			if node.Labels["team"] != "a" || node.Labels[karpv1.NodeRegisteredLabelKey] != "true" ||
				hasTaint(node, karpv1.UnregisteredNoExecuteTaint) || !hasTaint(node, corev1.Taint{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}) {
				t.Errorf("node not synced from its NodeClaim: labels %v, taints %v", node.Labels, node.Spec.Taints)
			}
			if !nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() || nc.Status.NodeName != name {
				t.Errorf("NodeClaim not registered: nodeName %q, conditions %+v", nc.Status.NodeName, nc.Status.Conditions)
			}
			if got := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue(); got != c.initialized {
				t.Errorf("NodeClaim Initialized=%t, want %t", got, c.initialized)
			}
			if got := node.Labels[karpv1.NodeInitializedLabelKey] == "true"; got != c.initialized {
				t.Errorf("node initialized label %t, want %t", got, c.initialized)
			}
		})
	}
}

// TestTerminateConflict: Terminate's writes — the disrupted taint on the
// Node and the removal of the termination finalizer — converge inline on a
// conflict. (The API server forbids adding a finalizer to an object being
// deleted, so the concurrent NodeClaim write is an annotation.)
func TestTerminateConflict(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	for i, c := range []struct {
		name  string
		path  string
		write func(name string) func(ctx context.Context) error
	}{
		{
			name: "a label written on the Node before the disrupted taint", path: "/api/v1/nodes/%s",
			write: func(name string) func(ctx context.Context) error {
				return func(ctx context.Context) error {
					return update(ctx, w.kube, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, false, func(n *corev1.Node) {
						if n.Labels == nil {
							n.Labels = map[string]string{}
						}
						n.Labels["concurrent"] = "yes"
					})
				}
			},
		},
		{
			name: "an annotation written on the NodeClaim before the finalizer is removed", path: "/apis/karpenter.sh/v1/nodeclaims/%s",
			write: func(name string) func(ctx context.Context) error {
				return func(ctx context.Context) error {
					return update(ctx, w.kube, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}, false, func(nc *karpv1.NodeClaim) {
						metav1.SetMetaDataAnnotation(&nc.ObjectMeta, "concurrent", "yes")
					})
				}
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("term-%d-%d", i, time.Now().UnixNano()%1e6)
			w.deletingClaim(t, ctx, name, nil)
			kube, in := w.interfered(t, fmt.Sprintf(c.path, name), 1, c.write(name))
			lc := lifecycle.New(lifecycle.Options{Kube: kube, Deleter: w.launcher, Evictor: w.evictor, Logger: slog.New(slog.DiscardHandler)})

			res, err := w.terminateAcrossDelete(t, ctx, lc, name)
			if !in.fired || in.err != nil {
				t.Fatalf("the concurrent write did not happen (fired=%t, %d PATCHes to %s): %v", in.fired, in.seen, in.path, in.err)
			}
			if err != nil || !res.Finished {
				t.Fatalf("Terminate = %+v, %v; want it finished despite the conflict (no call failing on it)", res, err)
			}
			nc := &karpv1.NodeClaim{}
			if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); !apierrors.IsNotFound(err) {
				t.Fatalf("NodeClaim still there (finalizers %v, %v) after Terminate finished", nc.Finalizers, err)
			}
		})
	}
}

// TestDrainRetryDelay: the drain retry follows the API server's
// Retry-After, bounded, and falls back to the configured delay without one.
func TestDrainRetryDelay(t *testing.T) {
	const fallback = 2 * time.Second
	for _, c := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{name: "pods only terminating: no suggestion", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 2}, want: fallback},
		{name: "a PDB refusal without Retry-After", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Blocked: 1}, want: fallback},
		{name: "Retry-After within bounds is used", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Blocked: 1, RetryAfter: 10 * time.Second}, want: 10 * time.Second},
		{name: "Retry-After below the floor", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Blocked: 1, RetryAfter: 200 * time.Millisecond}, want: lifecycle.MinDrainRetry},
		{name: "Retry-After above the ceiling", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Blocked: 1, RetryAfter: time.Hour}, want: lifecycle.MaxDrainRetry},
		{name: "wrapped DrainPendingError", err: fmt.Errorf("terminating: %w", &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Blocked: 1, RetryAfter: 30 * time.Second}), want: 30 * time.Second},
		{name: "an EvictionBlockedError on its own", err: lifecycle.NewEvictionBlockedError("default", "p", "budget", 5*time.Second), want: 5 * time.Second},
		{name: "interrupted: the deadline's force window comes first", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Blocked: 1, RetryAfter: 10 * time.Second, Interrupted: true, ForceIn: 3 * time.Second}, want: 3 * time.Second},
		{name: "interrupted: force window far off, Retry-After first", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Blocked: 1, RetryAfter: 4 * time.Second, Interrupted: true, ForceIn: 20 * time.Second}, want: 4 * time.Second},
		{name: "interrupted: past the force window, the floor", err: &lifecycle.DrainPendingError{Node: "n", Remaining: 1, Interrupted: true}, want: lifecycle.MinDrainRetry},
		{name: "an unrelated error", err: errors.New("boom"), want: fallback},
		{name: "no error", err: nil, want: fallback},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := lifecycle.DrainRetryDelay(c.err, fallback); got != c.want {
				t.Fatalf("DrainRetryDelay(%v) = %s, want %s", c.err, got, c.want)
			}
		})
	}
}

func hasTaint(node *corev1.Node, t corev1.Taint) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(have corev1.Taint) bool { return have.MatchTaint(&t) })
}
