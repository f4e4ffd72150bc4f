package lifecycle_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localbus"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// A launch schedules the liveness check when its VM exists, then writes
// Launched. When that write fails, the launch's retry schedules the check
// again under the same MessageId, and duplicate detection drops it. The
// first check then finds the NodeClaim not launched yet: it must schedule
// itself again, or a VM that never joins holds its pods forever.
func TestLivenessSurvivesAnEarlyCheck(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	const ttl = 2 * time.Second
	lb := localbus.New(localbus.Options{})
	if err := lb.CreateQueue(bus.QueueLifecycle, localbus.QueueOptions{RequiresDuplicateDetection: true}); err != nil {
		t.Fatal(err)
	}
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Publisher: lb,
		ClusterName: "test", RegistrationTTL: ttl, Logger: slog.New(slog.DiscardHandler)})

	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "never-joins", Labels: map[string]string{karpv1.NodePoolLabelKey: "np"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable,
				Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D2s_v5"}}}}}
	ownership.Mark(nc)
	if err := w.kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	scheduleCheck := func() {
		t.Helper()
		if err := triggers.Publish(ctx, lb, triggers.Liveness("test", nc.Name, string(nc.UID), time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	// next receives the next liveness check and runs it.
	next := func(what string) lifecycle.LivenessResult {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 3*ttl)
		defer cancel()
		d, err := lb.Receive(rctx, bus.QueueLifecycle)
		if err != nil {
			t.Fatalf("%s: no liveness check arrived within %s (%v): NodeClaim %s would never be checked again", what, 3*ttl, err, nc.Name)
		}
		if err := lb.Complete(d); err != nil {
			t.Fatal(err)
		}
		res, err := lc.Liveness(ctx, nc.Name, string(nc.UID))
		if err != nil {
			t.Fatalf("%s: Liveness: %v", what, err)
		}
		// What the Functions' adapter does with the outcome.
		if err := triggers.Publish(ctx, lb, res.Outcome.Continuations...); err != nil {
			t.Fatal(err)
		}
		return res
	}

	scheduleCheck() // launch attempt 1: the VM exists; writing Launched then fails
	if res := next("the check before Launched"); res.Deleted || res.RecheckAt.IsZero() {
		t.Fatalf("a check that finds the NodeClaim not launched yet: %+v; want it to schedule itself again", res)
	}
	scheduleCheck() // launch attempt 2 schedules it again: a duplicate, dropped
	stored := &karpv1.NodeClaim{}
	if err := w.kube.Get(ctx, client.ObjectKeyFromObject(nc), stored); err != nil {
		t.Fatal(err)
	}
	stored.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	if err := w.kube.Status().Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		res := next("the check after Launched")
		if res.Deleted {
			break
		}
		if i == 3 || res.RecheckAt.IsZero() {
			t.Fatalf("check %d after Launched: %+v; want the NodeClaim deleted once %s passed without a Node", i+1, res, ttl)
		}
	}
	err := w.kube.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("NodeClaim %s after its registration timeout: %v; want it deleted", nc.Name, err)
	}
}
