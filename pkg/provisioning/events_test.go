package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// TestEventsOffThePassPath: a pass's events are bounded as Karpenter's
// are, so a burst of pods costs a few event requests, not one or two per
// pod, and what is left out is counted.
func TestEventsOffThePassPath(t *testing.T) {
	w := newWorld(t, limitsCatalog)
	t.Run("nominations share Karpenter's rate limiter across passes", func(t *testing.T) { testNominationLimit(t, w) })
	t.Run("the default limiter bounds a pass to burst plus rate", func(t *testing.T) { testDefaultNominationLimit(t, w) })
	t.Run("stuck reports are bounded per pass and deduplicated", func(t *testing.T) { testStuckReports(t, w) })
}

// testNominationLimit: one Provisioner (a warm instance) over three
// passes; its limiter is Karpenter's token bucket (5 a second, burst 10) on
// a clock the test steps, so the counts are exact.
func testNominationLimit(t *testing.T, w world) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	limiter := flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(provisioning.NominationQPS, provisioning.NominationBurst, clk)
	prov := provisioning.New(provisioning.Options{Kube: w.kube, Catalog: w.cat, ClusterName: "test",
		Logger: slog.New(slog.DiscardHandler), NominationLimiter: limiter})
	var pods []*corev1.Pod
	for i, pass := range []struct {
		name        string
		newPods     int
		step        time.Duration // the limiter's clock moves this much first
		wantWritten int           // Nominated events on all the passes' pods after the pass
		wantRefused int           // counted in the pass's EventsNotWritten
	}{
		{name: "a burst of 25 writes the bucket's 10", newPods: 25, wantWritten: 10, wantRefused: 15},
		{name: "the next pass at once finds the bucket empty", newPods: 5, wantWritten: 10, wantRefused: 5},
		{name: "a second later 5 tokens are back", newPods: 8, step: time.Second, wantWritten: 15, wantRefused: 3},
	} {
		t.Run(pass.name, func(t *testing.T) {
			// A pool of its own: the earlier passes' claims cannot take
			// these pods, so each is nominated to a new claim.
			pool := fmt.Sprintf("nominate-%d", i)
			namesPool(t, ctx, w.kube, pool)
			for j := range pass.newPods {
				pods = append(pods, stuckPod(t, ctx, w.kube, pool, fmt.Sprintf("%s-%d-%d", pool, i, j), time.Now()))
			}
			clk.SetTime(clk.Now().Add(pass.step))
			res, err := prov.Provision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(eventsOn(t, ctx, w.kube, pods, events.ReasonNominated)); got != pass.wantWritten {
				t.Errorf("%d Nominated events on the passes' pods; want %d", got, pass.wantWritten)
			}
			if got := refused(res, events.ReasonNominated); got != pass.wantRefused {
				t.Errorf("pass counts %d Nominated events not written (%s); want %d", got, res.EventsNotWritten, pass.wantRefused)
			}
		})
	}
}

// testDefaultNominationLimit: a Provisioner with its own limiter (the real
// clock) writes at most burst + rate × the pass's seconds, and counts the
// rest: every nominated pod is written or counted.
func testDefaultNominationLimit(t *testing.T, w world) {
	ctx := context.Background()
	const pool, newPods = "nominate-default", 40
	namesPool(t, ctx, w.kube, pool)
	prov := provisioning.New(provisioning.Options{Kube: w.kube, Catalog: w.cat, ClusterName: "test",
		Logger: slog.New(slog.DiscardHandler)})
	var pods []*corev1.Pod
	for j := range newPods {
		pods = append(pods, stuckPod(t, ctx, w.kube, pool, fmt.Sprintf("%s-%d", pool, j), time.Now()))
	}
	start := time.Now()
	res, err := prov.Provision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seconds := int(time.Since(start)/time.Second) + 1
	written := len(eventsOn(t, ctx, w.kube, pods, events.ReasonNominated))
	if most := provisioning.NominationBurst + provisioning.NominationQPS*seconds; written > most {
		t.Errorf("%d Nominated events in a pass of under %d s; want at most %d", written, seconds, most)
	}
	if got := refused(res, events.ReasonNominated); written+got != newPods {
		t.Errorf("%d written and %d counted as not written; want all %d nominations accounted for", written, got, newPods)
	}
}

// testStuckReports: twelve pods pending long past StuckAfter, and a bound
// of five reports a pass. A warm instance reports the oldest five, then
// the next five, then the last two; after that, within Karpenter's
// 5-minute window, nothing is written again although each message (the
// time waited) has changed. A cold instance reads the window from the
// events and writes no repeat either.
func testStuckReports(t *testing.T, w world) {
	ctx := context.Background()
	const pool, maxReports = "stuck", 5
	namesPool(t, ctx, w.kube, pool)
	var pods []*corev1.Pod // oldest pending first
	for j := range 12 {
		since := time.Now().Add(-time.Duration(30-j) * time.Minute)
		pods = append(pods, stuckPod(t, ctx, w.kube, pool, fmt.Sprintf("%s-%d", pool, j), since))
	}
	newProv := func() *provisioning.Provisioner {
		return provisioning.New(provisioning.Options{Kube: w.kube, Catalog: w.cat, ClusterName: "test",
			Logger: slog.New(slog.DiscardHandler), MaxStuckReports: maxReports})
	}
	warm := newProv()
	for _, pass := range []struct {
		name string
		cold bool
		// wantReported: the oldest this many pods carry one
		// FailedScheduling event each, the others none.
		wantReported int
		wantLeft     int // counted in the pass's EventsNotWritten
	}{
		{name: "the five oldest first", wantReported: 5, wantLeft: 7},
		{name: "the next five, the first five remembered", wantReported: 10, wantLeft: 2},
		{name: "the last two", wantReported: 12},
		{name: "no repeat within the window", wantReported: 12},
		// A cold instance reads the five oldest (its bound) and leaves the
		// rest unread this pass; still no repeat.
		{name: "no repeat from a cold instance", cold: true, wantReported: 12, wantLeft: 7},
	} {
		t.Run(pass.name, func(t *testing.T) {
			prov := warm
			if pass.cold {
				prov = newProv()
			}
			res, err := prov.Provision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			reported := eventsOn(t, ctx, w.kube, pods, events.ReasonFailedScheduling)
			for j, pod := range pods {
				ev, ok := reported[pod.UID]
				switch {
				case j < pass.wantReported && (!ok || ev.Count != 1 || !strings.HasPrefix(ev.Message, "karpfunc: pending for ")):
					t.Errorf("pod %s (%d-th oldest): event %v, count %d, message %q; want one report saying how long it waited", pod.Name, j+1, ok, ev.Count, ev.Message)
				case j >= pass.wantReported && ok:
					t.Errorf("pod %s (%d-th oldest) reported (%q); want only the %d oldest", pod.Name, j+1, ev.Message, pass.wantReported)
				}
			}
			if got := refused(res, events.ReasonFailedScheduling); got != pass.wantLeft {
				t.Errorf("pass counts %d stuck reports not written (%s); want %d", got, res.EventsNotWritten, pass.wantLeft)
			}
		})
	}
}

// stuckPod creates a pending pod for pool that kube-scheduler marked
// Unschedulable at since.
func stuckPod(t testing.TB, ctx context.Context, kube client.Client, pool, name string, since time.Time) *corev1.Pod {
	t.Helper()
	pod := testfixtures.Pod(testfixtures.PodOptions{Name: name, CPU: "1"})
	pod.Spec.NodeSelector = map[string]string{"pool": pool}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(since)}}
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// eventsOn returns karpfunc's events of reason on pods, by pod UID; more
// than one on a pod is an error.
func eventsOn(t *testing.T, ctx context.Context, kube client.Client, pods []*corev1.Pod, reason string) map[types.UID]corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	found := map[types.UID]corev1.Event{}
	for _, ev := range list.Items {
		mine := slices.ContainsFunc(pods, func(pod *corev1.Pod) bool { return pod.UID == ev.InvolvedObject.UID })
		if !mine || ev.Reason != reason || ev.Source.Component != events.Component {
			continue
		}
		if _, twice := found[ev.InvolvedObject.UID]; twice {
			t.Errorf("pod %s has more than one %s event", ev.InvolvedObject.Name, reason)
		}
		found[ev.InvolvedObject.UID] = ev
	}
	return found
}

// refused is how many events of reason the pass counted as not written.
func refused(res provisioning.Result, reason string) int {
	total := 0
	for key, count := range res.EventsNotWritten {
		if key.Reason == reason {
			total += count
		}
	}
	return total
}
