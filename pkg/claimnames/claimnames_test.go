package claimnames_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

func pod(uid string) *corev1.Pod {
	return testfixtures.Pod(testfixtures.PodOptions{Name: "p-" + uid, UID: uid})
}

func TestName(t *testing.T) {
	a, b, c := pod("a"), pod("b"), pod("c")
	long := strings.Repeat("n", 80)
	tests := []struct {
		name         string
		poolX, poolY string
		x, y         []*corev1.Pod
		genX, genY   int64
		same         bool
	}{
		{"same pods in any order", "general", "general", []*corev1.Pod{a, b}, []*corev1.Pod{b, a}, 7, 7, true},
		{"different pods", "general", "general", []*corev1.Pod{a, b}, []*corev1.Pod{a, c}, 7, 7, false},
		{"different pool", "general", "gpu", []*corev1.Pod{a}, []*corev1.Pod{a}, 7, 7, false},
		{"different generation", "general", "general", []*corev1.Pod{a}, []*corev1.Pod{a}, 7, 8, false},
		{"no pods (a replacement)", "general", "general", nil, nil, 7, 8, false},
		{"a long pool name is cut", long, long, []*corev1.Pod{a}, []*corev1.Pod{a}, 7, 7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y := claimnames.Name(tt.poolX, tt.x, tt.genX), claimnames.Name(tt.poolY, tt.y, tt.genY)
			if (x == y) != tt.same {
				t.Errorf("names %s and %s; same=%t, want %t", x, y, x == y, tt.same)
			}
			prefix := tt.poolX
			if len(prefix) > 46 {
				prefix = prefix[:46]
			}
			if !strings.HasPrefix(x, prefix+"-") || len(x) > 63 {
				t.Errorf("name %s is not <nodepool>-<hash> within 63 characters", x)
			}
		})
	}
}

func TestFree(t *testing.T) {
	pods := []*corev1.Pod{pod("a"), pod("b")}
	gen := func(n int64) string { return claimnames.Name("general", pods, n) }
	tests := []struct {
		name    string
		view    int64
		held    []string
		want    string
		wantGen int64
	}{
		{"nothing held: the view's generation", 100, nil, gen(100), 100},
		{"the view's generation held (a claim the pods cannot use, or one going away)", 100, []string{gen(100)}, gen(101), 101},
		{"two generations held", 100, []string{gen(100), gen(101)}, gen(102), 102},
		{"a generation below the view is never used", 100, []string{gen(99)}, gen(100), 100},
		{"an unrelated name held", 100, []string{"general-0123456789abcdef"}, gen(100), 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held := map[string]bool{}
			for _, n := range tt.held {
				held[n] = true
			}
			got, g := claimnames.Free("general", pods, tt.view, func(n string) bool { return held[n] })
			if got != tt.want || g != tt.wantGen {
				t.Errorf("Free = %s (generation %d), want %s (%d)", got, g, tt.want, tt.wantGen)
			}
		})
	}
}

// TestCounter: the counter starts at the clock's Unix milliseconds, Retire
// raises it past a generation and never lowers it, and a damaged counter
// is a clear error rather than a silent restart.
func TestCounter(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := context.Background()
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	counter := claimnames.NewCounter(kube, offerings.DefaultNamespace, clocktesting.NewFakeClock(start))

	read := func() int64 {
		t.Helper()
		v, err := counter.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := read(); v != start.UnixMilli() {
		t.Fatalf("first read = %d, want the creation time %d", v, start.UnixMilli())
	}
	v := read()
	for _, c := range []struct {
		retire, want int64
	}{
		{v, v + 1},       // the current generation: raised past it
		{v, v + 1},       // again: already past, unchanged
		{v - 5, v + 1},   // an older generation: never lowered
		{v + 10, v + 11}, // a generation ahead (names skipped past held ones)
	} {
		if err := counter.Retire(ctx, c.retire); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != c.want {
			t.Fatalf("after Retire(%d): counter %d, want %d", c.retire, got, c.want)
		}
	}

	lease := &coordinationv1.Lease{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: offerings.DefaultNamespace, Name: claimnames.LeaseName}, lease); err != nil {
		t.Fatal(err)
	}
	lease.Annotations[apis.AnnotationNodeClaimGeneration] = "soon"
	if err := kube.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := counter.Read(ctx); err == nil || !strings.Contains(err.Error(), apis.AnnotationNodeClaimGeneration) {
		t.Fatalf("reading a damaged counter: %v; want an error naming the annotation", err)
	}
}
