package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/lifecycle"
)

// TestTerminateInterrupted: a spot interruption's deadline drives the drain.
// Every pod is evicted at once, with its grace period capped to the time
// left; a PDB holds until the force window before the deadline, then the
// pod is deleted; a later signal never moves the deadline back.
func TestTerminateInterrupted(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	name := fmt.Sprintf("nc-%d", time.Now().UnixNano()%1e9)
	node := w.deletingClaim(t, ctx, name, nil)
	for _, p := range []podSpec{{name: "i-app"}, {name: "i-pinned", annotate: true}, {name: "i-ds", daemon: true},
		{name: "i-crit", critical: true}, {name: "i-guarded", guarded: true}} {
		w.pod(t, ctx, node.Name, p)
	}
	nc := &karpv1.NodeClaim{}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(now)
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	deadline := now.Add(12 * time.Second)
	nc, first, err := lc.MarkInterrupted(ctx, nc, deadline, "test preemption")
	if err != nil || !first {
		t.Fatalf("MarkInterrupted = first %t, %v", first, err)
	}
	if _, first, err := lc.MarkInterrupted(ctx, nc, deadline.Add(time.Minute), "a later signal"); err != nil || first {
		t.Fatalf("second MarkInterrupted = first %t, %v; want a duplicate", first, err)
	}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	if got, ok := lifecycle.InterruptionDeadline(nc); !ok || !got.Equal(deadline) {
		t.Fatalf("deadline = %s, %t; want %s (a later signal must not move it)", got, ok, deadline)
	}
	if c := nc.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason); c == nil || c.Reason != lifecycle.ReasonSpotInterrupted {
		t.Fatalf("DisruptionReason condition = %+v", c)
	}

	// First pass: everything but the guarded pod is evicted at once, with
	// 12 s of grace (their own 30 s capped); the PDB holds.
	res, err := lc.Terminate(ctx, name)
	var pending *lifecycle.DrainPendingError
	if !errors.As(err, &pending) || !pending.Interrupted || pending.ForceIn != 12*time.Second-lifecycle.InterruptionForceWindow || res.Blocked != 1 {
		t.Fatalf("Terminate = %+v, %#v; want a pending interrupted drain, 1 blocked, force in 7s", res, err)
	}
	want := []string{"i-app", "i-crit", "i-ds", "i-pinned"}
	if got := w.terminating(t, ctx, node.Name); !slices.Equal(got, want) {
		t.Fatalf("terminating after the first pass: %v, want %v (all priority groups at once)", got, want)
	}
	var pods corev1.PodList
	if err := w.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil && (p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 12) {
			t.Errorf("pod %s evicted with grace %v; want 12 (30 capped to the time left)", p.Name, p.DeletionGracePeriodSeconds)
		}
	}
	w.finish(t, ctx, node.Name)

	// Before the force window the PDB still holds.
	clk.Step(5 * time.Second)
	if _, err := lc.Terminate(ctx, name); !lifecycle.IsDrainPending(err) {
		t.Fatalf("Terminate 7s before the deadline = %v; want pending", err)
	}
	if got := w.terminating(t, ctx, node.Name); len(got) != 0 {
		t.Fatalf("terminating 7s before the deadline: %v; the PDB must hold", got)
	}
	// Inside it the deadline wins.
	clk.Step(3 * time.Second)
	res, err = lc.Terminate(ctx, name)
	if !lifecycle.IsDrainPending(err) || res.Deleted != 1 {
		t.Fatalf("Terminate 4s before the deadline = %+v, %v; want the guarded pod deleted", res, err)
	}
	if got := w.terminating(t, ctx, node.Name); !slices.Equal(got, []string{"i-guarded"}) {
		t.Fatalf("terminating: %v", got)
	}
	w.finish(t, ctx, node.Name)
	if res, err = w.terminateAcrossDelete(t, ctx, lc, name); err != nil || !res.Finished {
		t.Fatalf("Terminate = %+v, %v; want finished", res, err)
	}
}

// TestTerminateInterruptedNodeGone: when the VM and its Node are already
// gone, the pods still bound to it are deleted at once and the NodeClaim
// finishes without a drain.
func TestTerminateInterruptedNodeGone(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	name := fmt.Sprintf("nc-%d", time.Now().UnixNano()%1e9)
	node := w.deletingClaim(t, ctx, name, nil)
	w.pod(t, ctx, node.Name, podSpec{name: "orphan-guarded", guarded: true})
	if err := w.kube.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Logger: slog.New(slog.DiscardHandler)})
	if _, _, err := lc.MarkInterrupted(ctx, nc, time.Now(), "VM gone"); err != nil {
		t.Fatal(err)
	}
	res, err := w.terminateAcrossDelete(t, ctx, lc, name)
	if err != nil || !res.Finished || res.Deleted != 1 {
		t.Fatalf("Terminate = %+v, %v; want finished with the orphan deleted", res, err)
	}
	var pods corev1.PodList
	if err := w.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil || len(pods.Items) != 0 {
		t.Fatalf("pods left on the vanished node: %d, %v", len(pods.Items), err)
	}
}

// TestStaleStatusWriteKeepsTheInterruption: another function's write of a
// NodeClaim condition, computed from a read taken before the interruption
// was marked (the Disruption function's Consolidatable, say), keeps the
// DisruptionReason the Interruption function wrote meanwhile. A plain merge
// patch would replace the whole conditions list with the stale one (CI:
// the duplicate signal then found the NodeClaim not interrupted and sent a
// second SpotInterrupted event).
func TestStaleStatusWriteKeepsTheInterruption(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	name := fmt.Sprintf("nc-%d", time.Now().UnixNano()%1e9)
	w.deletingClaim(t, ctx, name, nil)
	stale := &karpv1.NodeClaim{}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, stale); err != nil {
		t.Fatal(err)
	}
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Logger: slog.New(slog.DiscardHandler)})
	if _, first, err := lc.MarkInterrupted(ctx, stale.DeepCopy(), time.Now().Add(time.Minute), "test preemption"); err != nil || !first {
		t.Fatalf("MarkInterrupted = first %t, %v", first, err)
	}
	given := stale.DeepCopy()
	got, wrote, err := lifecycle.WriteNodeClaimStatus(ctx, w.kube, stale, func(cur *karpv1.NodeClaim) bool {
		return cur.StatusConditions().SetTrue(karpv1.ConditionTypeConsolidatable)
	})
	if err != nil || !wrote {
		t.Fatalf("WriteNodeClaimStatus = wrote %t, %v", wrote, err)
	}
	if !equality.Semantic.DeepEqual(stale, given) {
		t.Error("WriteNodeClaimStatus wrote into the NodeClaim it was given; a warm snapshot shares it with its cache")
	}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if c := got.StatusConditions().Get(karpv1.ConditionTypeConsolidatable); c == nil || !c.IsTrue() {
		t.Errorf("Consolidatable = %+v; want the write made", c)
	}
	if _, ok := lifecycle.InterruptionDeadline(got); !ok {
		t.Errorf("the stale write erased the interruption: DisruptionReason = %+v", got.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason))
	}
	if _, first, err := lc.MarkInterrupted(ctx, got, time.Now().Add(time.Minute), "a duplicate signal"); err != nil || first {
		t.Errorf("a duplicate signal after the stale write: first %t, %v; want a duplicate", first, err)
	}
}
