package events_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/events"
)

// startAPIServer starts etcd and kube-apiserver (no controllers: nothing
// else touches the events).
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	cp := testenv.ControlPlane(t, controlplane.Options{})
	return testenv.Client(t, cp.RESTConfig())
}

// TestPublishConcurrently: publishers racing on one event (the create, then
// the count update) each count once: one Event, count = publishes.
func TestPublishConcurrently(t *testing.T) {
	kube := startAPIServer(t)
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		before     int // publishes one after another first
		concurrent int // then publishers released together
		want       int32
	}{
		{name: "two at once race on the create", concurrent: 2, want: 2},
		{name: "two at once on an existing event race on the count", before: 1, concurrent: 2, want: 3},
		{name: "four at once", concurrent: 4, want: 4},
		{name: "one after another", before: 3, want: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%d", time.Now().UnixNano())}}
			if err := kube.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
			ev := events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: events.ReasonFailedDraining, Message: "blocked"}
			for range c.before {
				if err := events.NewRecorder(kube, clock.RealClock{}).Publish(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			start := make(chan struct{})
			errs := make(chan error, c.concurrent)
			var wg sync.WaitGroup
			for range c.concurrent {
				// One Recorder each, as separate function instances would have.
				r := events.NewRecorder(kube, clock.RealClock{})
				wg.Go(func() {
					<-start
					errs <- r.Publish(ctx, ev)
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("concurrent Publish: %v", err)
				}
			}
			var list corev1.EventList
			if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			var mine []corev1.Event
			for _, e := range list.Items {
				if e.InvolvedObject.UID == obj.UID {
					mine = append(mine, e)
				}
			}
			if len(mine) != 1 || mine[0].Count != c.want {
				counts := make([]int32, len(mine))
				for i, e := range mine {
					counts[i] = e.Count
				}
				t.Fatalf("%d events with counts %v; want one event with count %d", len(mine), counts, c.want)
			}
		})
	}
}

// TestDedupeWindow: a node that stays unconsolidatable is explained on
// every pass, each time with a message carrying a different time. As in
// Karpenter, one event is written per deduplication window, whatever the
// message, by warm and cold instances alike; a new window writes it again
// with the latest message.
func TestDedupeWindow(t *testing.T) {
	kube := startAPIServer(t)
	ctx := context.Background()
	node := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unconsolidatable"}}
	if err := kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	const window = 15 * time.Minute
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	warm := events.NewRecorder(kube, clk)
	pass := func(i int) {
		msg := fmt.Sprintf("not consolidatable until %s", clk.Now().Add(time.Minute).Format(time.RFC3339))
		rec := warm
		if i%2 == 1 {
			rec = events.NewRecorder(kube, clk) // a cold instance
		}
		ev := events.Event{Object: node, Type: corev1.EventTypeNormal, Reason: events.ReasonUnconsolidatable, Message: msg,
			DedupeValues: []string{string(node.UID)}, DedupeTimeout: window}
		if err := rec.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (int, int32, string) {
		var list corev1.EventList
		if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		n, total, last := 0, int32(0), ""
		for _, e := range list.Items {
			if e.InvolvedObject.UID == node.UID && e.Reason == events.ReasonUnconsolidatable {
				n++
				total += e.Count
				last = e.Message
			}
		}
		return n, total, last
	}
	// Ten passes a minute apart: inside one window.
	for i := range 10 {
		pass(i)
		clk.Step(time.Minute)
	}
	if n, total, _ := count(); n != 1 || total != 1 {
		t.Fatalf("after 10 passes in one %s window: %d events, %d occurrences; want one", window, n, total)
	}
	// The window passes: the next pass writes it again, with its message.
	clk.Step(window)
	pass(10)
	want := fmt.Sprintf("not consolidatable until %s", clk.Now().Add(time.Minute).Format(time.RFC3339))
	for i := 11; i < 15; i++ {
		clk.Step(time.Minute)
		pass(i)
	}
	if n, total, last := count(); n != 1 || total != 2 || last != want {
		t.Fatalf("after a second window: %d events, %d occurrences, message %q; want one event, two occurrences, message %q", n, total, last, want)
	}
}

// TestPublishRequests: a new event costs one request (the create), so a
// pass nominating a thousand pods writes a thousand, not two thousand; a
// repeat is read and has its count bumped. Deduplicated events still read
// first (the event is the record of the window).
func TestPublishRequests(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube, err := client.NewWithWatch(cp.RESTConfig(), client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		publishes int
		dedupe    bool
		want      requestCounts
	}{
		{name: "a new event is one create", publishes: 1, want: requestCounts{creates: 1}},
		{name: "a repeat reads and bumps the count", publishes: 2,
			want: requestCounts{creates: 2, gets: 1, updates: 1}},
		{name: "a deduplicated event reads before it creates", publishes: 1, dedupe: true,
			want: requestCounts{creates: 1, gets: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%d", time.Now().UnixNano())}}
			if err := kube.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			var got requestCounts
			counting := interceptor.NewClient(kube, interceptor.Funcs{
				Create: func(ctx context.Context, inner client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					got.creates++
					return inner.Create(ctx, obj, opts...)
				},
				Get: func(ctx context.Context, inner client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					got.gets++
					return inner.Get(ctx, key, obj, opts...)
				},
				Update: func(ctx context.Context, inner client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					got.updates++
					return inner.Update(ctx, obj, opts...)
				},
			})
			recorder := events.NewRecorder(counting, clock.RealClock{})
			ev := events.Event{Object: pod, Type: corev1.EventTypeNormal, Reason: events.ReasonNominated,
				Message: "Pod should schedule on: nodeclaim/general-abc"}
			if tc.dedupe {
				ev.DedupeValues = []string{string(pod.UID)}
			}
			for range tc.publishes {
				if err := recorder.Publish(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			if got != tc.want {
				t.Fatalf("%d publishes made %+v requests; want %+v", tc.publishes, got, tc.want)
			}
			var list corev1.EventList
			if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			for _, item := range list.Items {
				if item.InvolvedObject.UID == pod.UID && item.Count != int32(tc.publishes) {
					t.Fatalf("event count %d after %d publishes", item.Count, tc.publishes)
				}
			}
		})
	}
}

type requestCounts struct{ creates, gets, updates int }

// TestRecordOutcomes: what Record says it did, with a rate limiter as
// Karpenter's (a token bucket on a clock the test holds still): the dedupe
// window is looked at before the limiter, so a duplicate takes no token;
// a refused event is not written.
func TestRecordOutcomes(t *testing.T) {
	kube := startAPIServer(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name  string
		burst int
		cold  bool // the second publish from a new Recorder (a cold instance)
		want  []events.Outcome
		// wantEvents: events written on the object
		wantEvents int
	}{
		{name: "a repeat within the window is remembered, and takes no token", burst: 1,
			want: []events.Outcome{events.Written, events.Remembered}, wantEvents: 1},
		// The limiter is asked before the read (it bounds requests), so
		// the cold instance's duplicate takes the second token.
		{name: "a cold instance reads the window from the event", burst: 2, cold: true,
			want: []events.Outcome{events.Written, events.Duplicate}, wantEvents: 1},
		{name: "an empty bucket refuses the event, and nothing is written", burst: 0,
			want: []events.Outcome{events.RateLimited, events.RateLimited}, wantEvents: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%d", time.Now().UnixNano())}}
			if err := kube.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
			limiter := flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(1, tc.burst, clk)
			recorder := events.NewRecorder(kube, clk)
			var got []events.Outcome
			for i := range tc.want {
				if i > 0 && tc.cold {
					recorder = events.NewRecorder(kube, clk)
				}
				outcome, err := recorder.Record(ctx, events.Event{Object: obj, Type: corev1.EventTypeNormal, Reason: events.ReasonNominated,
					Message: fmt.Sprintf("try %d", i), DedupeValues: []string{string(obj.UID)}, RateLimiter: limiter})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, outcome)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("outcomes %v; want %v", got, tc.want)
			}
			var list corev1.EventList
			if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			written := 0
			for _, item := range list.Items {
				if item.InvolvedObject.UID == obj.UID {
					written++
				}
			}
			if written != tc.wantEvents {
				t.Errorf("%d events on the object; want %d", written, tc.wantEvents)
			}
		})
	}
}
