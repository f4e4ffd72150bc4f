package scheduler_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestDaemonSetOverheadFollowsTaints: a DaemonSet's overhead is reserved on
// a NodePool's nodes exactly when the DaemonSet controller would run its
// pod there: only NoSchedule and NoExecute taints keep it off, and the
// controller's own tolerations (not-ready, unreachable, the node-condition
// taints, network-unavailable for host-network pods) always apply.
func TestDaemonSetOverheadFollowsTaints(t *testing.T) {
	for _, tc := range []struct {
		name        string
		taint       corev1.Taint
		hostNetwork bool
		wantCPU     string // the claim's requests: the pod's 1 vCPU plus the daemon's 500m when it runs
	}{
		{name: "PreferNoSchedule keeps no daemon off", taint: corev1.Taint{Key: "pool", Value: "soft", Effect: corev1.TaintEffectPreferNoSchedule}, wantCPU: "1500m"},
		{name: "an untolerated NoSchedule taint keeps it off", taint: corev1.Taint{Key: "pool", Value: "hard", Effect: corev1.TaintEffectNoSchedule}, wantCPU: "1"},
		{name: "an untolerated NoExecute taint keeps it off", taint: corev1.Taint{Key: "pool", Value: "hard", Effect: corev1.TaintEffectNoExecute}, wantCPU: "1"},
		{name: "memory-pressure is tolerated by the controller", taint: corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}, wantCPU: "1500m"},
		{name: "disk-pressure is tolerated by the controller", taint: corev1.Taint{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoSchedule}, wantCPU: "1500m"},
		{name: "pid-pressure is tolerated by the controller", taint: corev1.Taint{Key: corev1.TaintNodePIDPressure, Effect: corev1.TaintEffectNoSchedule}, wantCPU: "1500m"},
		{name: "unschedulable is tolerated by the controller", taint: corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, wantCPU: "1500m"},
		{name: "unreachable NoExecute is tolerated by the controller", taint: corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}, wantCPU: "1500m"},
		{name: "network-unavailable keeps a pod-network daemon off", taint: corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}, wantCPU: "1"},
		{name: "network-unavailable is tolerated for a host-network daemon", taint: corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}, hostNetwork: true, wantCPU: "1500m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("a", "1", "1Gi")
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} // the pod goes anywhere
			in := baseInput(t, p)
			in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{tc.taint}
			ds := pod("ds", "500m", "128Mi").Spec
			ds.HostNetwork = tc.hostNetwork
			in.DaemonSets = []*appsv1.DaemonSet{{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds}}}}
			r := scheduler.Solve(in)
			expectClaims(t, r, 1)
			if got := r.NewNodeClaims[0].Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tc.wantCPU)) != 0 {
				t.Errorf("claim requests %s CPU, want %s", got.String(), tc.wantCPU)
			}
		})
	}
}

// TestPreferNoScheduleDaemonLeavesRoom: on a PreferNoSchedule pool the
// DaemonSet's 500m is reserved, so a 1600m pod does not get a 2-vCPU node
// it and the daemon cannot share.
func TestPreferNoScheduleDaemonLeavesRoom(t *testing.T) {
	in := baseInput(t, pod("a", "1600m", "1Gi"))
	in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "pool", Value: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
	in.DaemonSets = []*appsv1.DaemonSet{{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: pod("ds", "500m", "128Mi").Spec}}}}
	r := scheduler.Solve(in)
	expectClaims(t, r, 1)
	for _, it := range r.NewNodeClaims[0].InstanceTypes {
		if it.Name == "small" || it.Name == "armsmall" {
			t.Errorf("types %s include a 2-vCPU size that cannot hold 1.6 + 0.5 daemon vCPU", typeNames(r.NewNodeClaims[0]))
		}
	}
}
