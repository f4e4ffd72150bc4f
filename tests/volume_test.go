package tests

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// TestZonalVolume: a pod whose PVC is bound to a PV living in one zone gets
// its node in that zone from the whole loop (relay, Provision, ARM, kwok,
// kube-scheduler), not in the zone that would be cheapest without the volume.
func TestZonalVolume(t *testing.T) {
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "e2e", BootDelay: 2 * time.Second})
	ctx := context.Background()
	kube := env.Kube
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "db", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}},
		}}},
	}

	// The zone the planner would pick with no volume; the PV lives elsewhere,
	// so ignoring volume topology cannot pass by luck.
	cluster, err := snapshot.List(ctx, kube)
	if err != nil {
		t.Fatal(err)
	}
	free := pod.DeepCopy()
	cluster.Pods = append(cluster.Pods, free)
	res := scheduler.Solve(cluster.Input(env.Catalog, snapshot.Offline))
	if len(res.NewNodeClaims) != 1 {
		t.Fatalf("planning the pod without its volume: %d NodeClaims, want 1 (unschedulable: %v)", len(res.NewNodeClaims), res.Unschedulable)
	}
	_, off := res.NewNodeClaims[0].Cheapest()
	zone := env.Options.Region + "-3"
	if off.Zone == zone {
		zone = env.Options.Region + "-2"
	}
	t.Logf("without the volume the pod would go to %s; the PV lives in %s", off.Zone, zone)

	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "db-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/db"}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "db-data"},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "db-data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty,
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	for _, o := range []client.Object{pv, pvc} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "the PVC bound", func() (bool, string) {
		var got corev1.PersistentVolumeClaim
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pvc), &got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == corev1.ClaimBound, "phase " + string(got.Status.Phase)
	})
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "db running", func() (bool, string) { return allRunning(ctx, kube, "db", 1) })

	var ncs karpv1.NodeClaimList
	if err := kube.List(ctx, &ncs); err != nil {
		t.Fatal(err)
	}
	for _, nc := range ncs.Items {
		if got := nc.Labels[corev1.LabelTopologyZone]; got != zone {
			t.Errorf("NodeClaim %s is in zone %q, want %q (the PV's zone)", nc.Name, got, zone)
		}
	}
	var got corev1.Pod
	if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := kube.Get(ctx, client.ObjectKey{Name: got.Spec.NodeName}, &node); err != nil {
		t.Fatal(err)
	}
	if z := node.Labels[corev1.LabelTopologyZone]; z != zone {
		t.Errorf("pod runs on %s in zone %q, want %q", node.Name, z, zone)
	}
	if len(ncs.Items) != 1 {
		t.Errorf("%d NodeClaims for one pod, want 1", len(ncs.Items))
	}
}
