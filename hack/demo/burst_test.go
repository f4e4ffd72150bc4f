package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"
)

// TestTimeline: each phase ends with the last object to reach it, from the
// objects' own timestamps; objects not there yet leave it open.
func TestTimeline(t *testing.T) {
	start := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	at := func(seconds int) metav1.Time { return metav1.NewTime(start.Add(time.Duration(seconds) * time.Second)) }
	pod := func(created, bound, ready int) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(created)}}
		if bound > 0 {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(bound)})
		}
		if ready > 0 {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(ready)})
		}
		return pod
	}
	claim := func(created, launched, registered int) *karpv1.NodeClaim {
		claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(created)}}
		for _, cond := range []struct {
			kind string
			at   int
		}{{karpv1.ConditionTypeLaunched, launched}, {karpv1.ConditionTypeRegistered, registered}} {
			if cond.at > 0 {
				claim.Status.Conditions = append(claim.Status.Conditions, status.Condition{Type: cond.kind, Status: metav1.ConditionTrue, LastTransitionTime: at(cond.at)})
			}
		}
		return claim
	}
	for _, tc := range []struct {
		name                            string
		pods                            []*corev1.Pod
		claims                          []*karpv1.NodeClaim
		wantLastPod, wantBound, wantRun string
		wantFirstClaim, wantLaunched    string
		wantLaunchTimes                 []time.Duration
	}{
		{
			name:        "all there",
			pods:        []*corev1.Pod{pod(0, 20, 25), pod(30, 40, 44)},
			claims:      []*karpv1.NodeClaim{claim(9, 18, 19), claim(12, 30, 31)},
			wantLastPod: "   30s", wantBound: "   40s", wantRun: "   44s",
			wantFirstClaim: "    9s", wantLaunched: "   30s",
			wantLaunchTimes: []time.Duration{9 * time.Second, 18 * time.Second},
		},
		{
			name:        "nothing bound or launched yet",
			pods:        []*corev1.Pod{pod(0, 0, 0)},
			claims:      []*karpv1.NodeClaim{claim(5, 0, 0)},
			wantLastPod: "    0s", wantBound: "     -", wantRun: "     -",
			wantFirstClaim: "    5s", wantLaunched: "     -",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := burstTimeline{start: start}
			for _, pod := range tc.pods {
				line.addPod(pod)
			}
			for _, claim := range tc.claims {
				line.addClaim(claim)
			}
			for _, check := range []struct{ what, got, want string }{
				{"all pods created", line.since(line.lastPod), tc.wantLastPod},
				{"all pods bound", line.since(line.lastBound), tc.wantBound},
				{"all pods Running", line.since(line.lastRunning), tc.wantRun},
				{"first NodeClaim", line.since(line.firstClaim), tc.wantFirstClaim},
				{"all launched", line.since(line.lastLaunched), tc.wantLaunched},
			} {
				if check.got != check.want {
					t.Errorf("%s at %q; want %q", check.what, check.got, check.want)
				}
			}
			if len(line.launchTimes) != len(tc.wantLaunchTimes) {
				t.Fatalf("launch times %v; want %v", line.launchTimes, tc.wantLaunchTimes)
			}
			for i, want := range tc.wantLaunchTimes {
				if line.launchTimes[i] != want {
					t.Errorf("launch time %d: %s; want %s", i, line.launchTimes[i], want)
				}
			}
		})
	}
}

// TestPodEvents: a pod's first FailedScheduling (kube-scheduler's
// events.k8s.io event) and first Nominated (karpfunc's core event) are
// what count; another pod's events and other reporters' are left out.
func TestPodEvents(t *testing.T) {
	start := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	at := func(seconds int) time.Time { return start.Add(time.Duration(seconds) * time.Second) }
	scheduler := func(uid types.UID, seconds int) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{UID: uid}, Reason: "FailedScheduling",
			ReportingController: "default-scheduler", EventTime: metav1.NewMicroTime(at(seconds))}
	}
	nominated := func(uid types.UID, seconds int) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{UID: uid}, Reason: "Nominated",
			Source: corev1.EventSource{Component: "karpfunc"}, FirstTimestamp: metav1.NewTime(at(seconds))}
	}
	created := map[types.UID]time.Time{"a": at(0), "b": at(10)}
	line := burstTimeline{start: start}
	line.addPodEvents([]corev1.Event{
		scheduler("a", 3), scheduler("a", 20), nominated("a", 8),
		scheduler("b", 12), nominated("b", 30),
		scheduler("other", 90), nominated("other", 95),
		{InvolvedObject: corev1.ObjectReference{UID: "b"}, Reason: "FailedScheduling", Source: corev1.EventSource{Component: "karpfunc"},
			FirstTimestamp: metav1.NewTime(at(60))},
	}, created)
	slices.Sort(line.markTimes)
	slices.Sort(line.nominateTimes)
	if got := line.since(line.lastMarked); got != "   12s" {
		t.Errorf("all pods unschedulable at %q; want 12s", got)
	}
	if got := line.since(line.lastNominated); got != "   30s" {
		t.Errorf("last Nominated event at %q; want 30s", got)
	}
	wantMarks := []time.Duration{2 * time.Second, 3 * time.Second}
	wantNominations := []time.Duration{5 * time.Second, 18 * time.Second}
	if !slices.Equal(line.markTimes, wantMarks) || !slices.Equal(line.nominateTimes, wantNominations) {
		t.Errorf("created -> unschedulable %v, unschedulable -> nominated %v; want %v and %v",
			line.markTimes, line.nominateTimes, wantMarks, wantNominations)
	}
}

// TestBreakdownStart: the breakdown says what its seconds are counted
// from, the Deployment's creation or (-bare-pods) the first pod's.
func TestBreakdownStart(t *testing.T) {
	start := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, startEvent, want, notWant string
	}{
		{"deployment", startDeployment, "after the Deployment's creation)", "first pod's creation"},
		{"bare pods", startFirstPod, "after the first pod's creation)", "Deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			burstTimeline{start: start, startEvent: tc.startEvent}.print(&out)
			header, _, _ := strings.Cut(strings.TrimPrefix(out.String(), "\n"), "\n")
			if !strings.Contains(header, tc.want) || strings.Contains(header, tc.notWant) {
				t.Errorf("header %q; want it to say %q and not %q", header, tc.want, tc.notWant)
			}
		})
	}
}

// TestBurstPod: a bare burst pod is the burst Deployment's pod template,
// labels and spec, under its own name in the default namespace.
func TestBurstPod(t *testing.T) {
	var deployment appsv1.Deployment
	if err := yaml.UnmarshalStrict(burstManifest(3), &deployment); err != nil {
		t.Fatalf("decoding the burst manifest: %v", err)
	}
	template := deployment.Spec.Template
	for _, tc := range []struct {
		index    int
		wantName string
	}{{0, "burst-00000"}, {42, "burst-00042"}, {burstPodsMax - 1, "burst-04999"}} {
		pod := burstPod(tc.index)
		if pod.Name != tc.wantName || pod.Namespace != "default" {
			t.Errorf("pod %d is %s/%s; want default/%s", tc.index, pod.Namespace, pod.Name, tc.wantName)
		}
		if !equality.Semantic.DeepEqual(pod.Labels, template.Labels) {
			t.Errorf("pod %d labels %v; want the template's %v", tc.index, pod.Labels, template.Labels)
		}
		if !equality.Semantic.DeepEqual(pod.Spec, template.Spec) {
			t.Errorf("pod %d spec %+v; want the template's %+v", tc.index, pod.Spec, template.Spec)
		}
	}
}
