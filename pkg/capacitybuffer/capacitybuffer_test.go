package capacitybuffer

import (
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

func ptr[T any](v T) *T { return &v }

func podSpec(cpu, memory string) corev1.PodSpec {
	requests := corev1.ResourceList{}
	if cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests}}}}
}

func TestReplicas(t *testing.T) {
	spec := podSpec("500m", "1Gi")
	for _, tc := range []struct {
		name              string
		replicas, percent *int32
		limits            corev1.ResourceList
		want              int32
	}{
		{"nothing set", nil, nil, nil, 0},
		{"replicas only", ptr[int32](3), nil, nil, 3},
		{"percentage only", nil, ptr[int32](4), nil, 4},
		{"max of replicas and percentage", ptr[int32](3), ptr[int32](5), nil, 5},
		{"replicas above percentage", ptr[int32](7), ptr[int32](5), nil, 7},
		{"limits cap replicas", ptr[int32](10), nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, 4},
		{"limits above replicas", ptr[int32](2), nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, 2},
		{"limits alone fill", nil, nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("3Gi")}, 3},
		{"limits floor", nil, nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1999m")}, 3},
		{"limits on a resource not requested constrain nothing", ptr[int32](5), nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, 5},
		{"zero replicas", ptr[int32](0), nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Replicas(tc.replicas, tc.percent, tc.limits, &spec); got != tc.want {
				t.Errorf("Replicas = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPercentageReplicas(t *testing.T) {
	for _, tc := range []struct{ scalable, percent, want int32 }{
		{10, 20, 2}, {10, 25, 3}, {3, 10, 1}, {1, 1, 1}, {0, 50, 0}, {10, 0, 0}, {7, 100, 7}, {4, 150, 6},
	} {
		if got := PercentageReplicas(tc.scalable, tc.percent); got != tc.want {
			t.Errorf("PercentageReplicas(%d, %d%%) = %d, want %d", tc.scalable, tc.percent, got, tc.want)
		}
	}
}

func buffer(name string, mutate func(*autoscalingv1beta1.CapacityBuffer)) *autoscalingv1beta1.CapacityBuffer {
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 2}}
	mutate(cb)
	return cb
}

func objects() Objects {
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podSpec("1", "1Gi")}
	return Objects{
		PodTemplates: []*corev1.PodTemplate{{ObjectMeta: metav1.ObjectMeta{Name: "shape", Namespace: "default", Generation: 4}, Template: template}},
		Deployments:  []*appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.DeploymentSpec{Replicas: ptr[int32](10), Template: template}}},
		StatefulSets: []*appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Spec: appsv1.StatefulSetSpec{Template: template}}},
		ReplicaSets:  []*appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "other"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](4), Template: template}}},
	}
}

func TestEvaluate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cb         *autoscalingv1beta1.CapacityBuffer
		opts       Options
		wantReady  bool
		wantReason string
		want       int32
	}{
		{"podTemplateRef with replicas", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "shape"}
			cb.Spec.Replicas = ptr[int32](3)
		}), Options{}, true, ReasonResolved, 3},
		{"podTemplateRef ignores percentage", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "shape"}
			cb.Spec.Replicas = ptr[int32](1)
			cb.Spec.Percentage = ptr[int32](90)
		}), Options{}, true, ReasonResolved, 1},
		{"deployment percentage", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.ScalableRef = &autoscalingv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}
			cb.Spec.Percentage = ptr[int32](20)
		}), Options{}, true, ReasonResolved, 2},
		{"deployment percentage capped by limits", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.ScalableRef = &autoscalingv1beta1.ScalableRef{Kind: "Deployment", Name: "web"}
			cb.Spec.Percentage = ptr[int32](50)
			cb.Spec.Limits = autoscalingv1beta1.Limits{corev1.ResourceCPU: resource.MustParse("3")}
		}), Options{}, true, ReasonResolved, 3},
		{"statefulset without replicas counts one", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.ScalableRef = &autoscalingv1beta1.ScalableRef{Kind: "StatefulSet", Name: "db"}
			cb.Spec.Percentage = ptr[int32](10)
		}), Options{}, true, ReasonResolved, 1},
		{"replicaset in another namespace is not found", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.ScalableRef = &autoscalingv1beta1.ScalableRef{Kind: "ReplicaSet", Name: "rs"}
			cb.Spec.Replicas = ptr[int32](1)
		}), Options{}, false, ReasonScalableRefNotFound, 0},
		{"pod template not found", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "missing"}
			cb.Spec.Replicas = ptr[int32](1)
		}), Options{}, false, ReasonPodTemplateNotFound, 0},
		{"unsupported kind", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.ScalableRef = &autoscalingv1beta1.ScalableRef{APIGroup: "apps", Kind: "DaemonSet", Name: "web"}
		}), Options{}, false, ReasonResolutionFailed, 0},
		{"unsupported group", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.ScalableRef = &autoscalingv1beta1.ScalableRef{APIGroup: "argoproj.io", Kind: "Rollout", Name: "web"}
		}), Options{}, false, ReasonResolutionFailed, 0},
		{"no reference", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) { cb.Spec.Replicas = ptr[int32](1) }), Options{}, false, ReasonResolutionFailed, 0},
		{"unsupported strategy refused by name", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "shape"}
			cb.Spec.Replicas = ptr[int32](1)
			cb.Spec.ProvisioningStrategy = ptr("buffer.x-k8s.io/passive-capacity")
		}), Options{}, false, ReasonUnsupportedStrategy, 0},
		{"explicit active strategy", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "shape"}
			cb.Spec.Replicas = ptr[int32](2)
			cb.Spec.ProvisioningStrategy = ptr(autoscalingv1beta1.ActiveProvisioningStrategy)
		}), Options{}, true, ReasonResolved, 2},
		{"disabled", buffer("a", func(cb *autoscalingv1beta1.CapacityBuffer) {
			cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "shape"}
			cb.Spec.Replicas = ptr[int32](2)
		}), Options{Disabled: true}, false, ReasonDisabled, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate([]*autoscalingv1beta1.CapacityBuffer{tc.cb}, objects(), tc.opts)
			if len(got) != 1 {
				t.Fatalf("Evaluate returned %d buffers", len(got))
			}
			b := got[0]
			if b.Ready != tc.wantReady || b.Reason != tc.wantReason || b.Replicas != tc.want {
				t.Errorf("got ready %v reason %s replicas %d (%s), want %v %s %d", b.Ready, b.Reason, b.Replicas, b.Message, tc.wantReady, tc.wantReason, tc.want)
			}
			if pods := b.VirtualPods(); len(pods) != int(tc.want) {
				t.Errorf("%d virtual pods, want %d", len(pods), tc.want)
			}
		})
	}
}

func TestVirtualPods(t *testing.T) {
	cb := buffer("web", func(cb *autoscalingv1beta1.CapacityBuffer) {
		cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "shape"}
		cb.Spec.Replicas = ptr[int32](2)
	})
	objs := objects()
	objs.PodTemplates[0].Template.Spec.NodeName = "pinned"
	objs.PodTemplates[0].Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	objs.PodTemplates[0].Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	b := Evaluate([]*autoscalingv1beta1.CapacityBuffer{cb}, objs, Options{})[0]
	pods := b.VirtualPods()
	if len(pods) != 2 {
		t.Fatalf("%d virtual pods, want 2", len(pods))
	}
	for i, pod := range pods {
		if want := "capacity-buffer-web-" + string(rune('1'+i)); pod.Name != want {
			t.Errorf("pod %d named %s, want %s", i, pod.Name, want)
		}
		if !IsVirtual(pod) || KeyOf(pod) != "default/web" {
			t.Errorf("pod %s: virtual %v, key %q", pod.Name, IsVirtual(pod), KeyOf(pod))
		}
		if pod.Labels["app"] != "web" {
			t.Errorf("pod %s lost the template's labels: %v", pod.Name, pod.Labels)
		}
		if pod.Spec.NodeName != "" || len(pod.Spec.Volumes) != 0 || len(pod.Spec.Containers[0].VolumeMounts) != 0 {
			t.Errorf("pod %s keeps nodeName %q, volumes %v, mounts %v", pod.Name, pod.Spec.NodeName, pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts)
		}
		if pod.Spec.Priority == nil || *pod.Spec.Priority != math.MinInt32 {
			t.Errorf("pod %s priority %v, want MinInt32", pod.Name, pod.Spec.Priority)
		}
	}
	if IsVirtual(&corev1.Pod{}) || KeyOf(&corev1.Pod{}) != "" {
		t.Error("an ordinary pod is taken for a virtual one")
	}
}

func TestStatus(t *testing.T) {
	ready := Buffer{Ready: true, Reason: ReasonResolved, Message: "ok", Replicas: 2, PodTemplate: "shape", PodTemplateGeneration: 4}
	for _, tc := range []struct {
		name       string
		b          Buffer
		room       *Room
		wantReason string // Provisioning's; "" when none is written
		wantStatus metav1.ConditionStatus
	}{
		{"all on existing capacity", ready, &Room{Existing: 2}, ReasonFitsExistingCapacity, metav1.ConditionTrue},
		{"one needs a new node", ready, &Room{Existing: 1, New: 1}, ReasonRequiresNewCapacity, metav1.ConditionFalse},
		{"one fits nowhere", ready, &Room{Existing: 1, Failed: 1, Why: "no NodePool"}, ReasonRequiresNewCapacity, metav1.ConditionFalse},
		{"not placed this pass", ready, nil, "", ""},
		{"not ready", Buffer{Reason: ReasonPodTemplateNotFound, Message: "gone"}, nil, ReasonNotReadyForProvisioning, metav1.ConditionFalse},
		{"empty", Buffer{Ready: true, Reason: ReasonResolved}, nil, ReasonBufferEmpty, metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := buffer("web", func(*autoscalingv1beta1.CapacityBuffer) {})
			b := tc.b
			b.Object = cb
			Status(cb, &b, tc.room, metav1.Now())
			readyCond := apimeta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ReadyForProvisioningCondition)
			if readyCond == nil || (readyCond.Status == metav1.ConditionTrue) != b.Ready || readyCond.Reason != b.Reason || readyCond.ObservedGeneration != 2 {
				t.Errorf("ReadyForProvisioning %+v", readyCond)
			}
			if b.Ready && (cb.Status.Replicas == nil || *cb.Status.Replicas != b.Replicas) {
				t.Errorf("status.replicas %v, want %d", cb.Status.Replicas, b.Replicas)
			}
			if b.PodTemplate != "" && (cb.Status.PodTemplateRef == nil || cb.Status.PodTemplateRef.Name != "shape" || *cb.Status.PodTemplateGeneration != 4) {
				t.Errorf("status.podTemplateRef %v generation %v", cb.Status.PodTemplateRef, cb.Status.PodTemplateGeneration)
			}
			prov := apimeta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ProvisioningCondition)
			switch {
			case tc.wantReason == "" && prov != nil:
				t.Errorf("Provisioning written: %+v", prov)
			case tc.wantReason != "" && (prov == nil || prov.Reason != tc.wantReason || prov.Status != tc.wantStatus):
				t.Errorf("Provisioning %+v, want %s %s", prov, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

func TestRooms(t *testing.T) {
	cb := buffer("web", func(cb *autoscalingv1beta1.CapacityBuffer) {
		cb.Spec.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: "shape"}
		cb.Spec.Replicas = ptr[int32](4)
	})
	b := Evaluate([]*autoscalingv1beta1.CapacityBuffer{cb}, objects(), Options{})[0]
	v := b.VirtualPods()
	real := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real", Namespace: "default"}}
	res := scheduler.Result{
		Existing: []scheduler.Placement{
			{Node: "n1", NodeClaim: "c1", Pods: []*corev1.Pod{real, v[0]}},
			{NodeClaim: "c2", Pods: []*corev1.Pod{v[1]}},
		},
		NewNodeClaims: []*scheduler.NodeClaimPlan{{Pods: []*corev1.Pod{v[2]}}},
		Unschedulable: []scheduler.Unschedulable{{Pod: v[3], Reason: "no room"}, {Pod: real, Reason: "x"}},
	}
	room := Rooms(res)["default/web"]
	if room == nil || room.Existing != 2 || room.New != 1 || room.Failed != 1 || room.Why != "no room" || len(room.Nodes) != 2 {
		t.Fatalf("room %+v", room)
	}
	if holding := HoldingNodes(res); !holding["n1"] || len(holding) != 1 {
		t.Errorf("holding nodes %v, want n1 only", holding)
	}
	stripped := WithoutVirtual(res)
	if len(stripped.Existing) != 1 || len(stripped.Existing[0].Pods) != 1 || stripped.Existing[0].Pods[0] != real {
		t.Errorf("Existing without virtual pods: %+v", stripped.Existing)
	}
	if len(stripped.Unschedulable) != 1 || stripped.Unschedulable[0].Pod != real {
		t.Errorf("Unschedulable without virtual pods: %+v", stripped.Unschedulable)
	}
	if len(stripped.NewNodeClaims[0].Pods) != 1 {
		t.Error("a new NodeClaim lost the virtual pod it is sized for")
	}
}
