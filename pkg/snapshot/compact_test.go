package snapshot_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// fixtureCluster is a small cluster of API-server-shaped objects
// (managedFields, container statuses, probes, env, projected volumes,
// spread and anti-affinity), plus pods that exercise what compacting must
// keep: a host port, a do-not-disrupt annotation, an in-place resize
// reported in a container status.
func fixtureCluster(t *testing.T) snapshot.Cluster {
	t.Helper()
	generated := scaletest.Generate(scaletest.Size{Nodes: 30, BoundPods: 900, PendingPods: 120, Seed: 7})
	cluster := snapshot.Cluster{NodePools: generated.NodePools, NodeClasses: generated.NodeClasses, Nodes: generated.Nodes, NodeClaims: generated.NodeClaims}
	cluster.Pods = append(cluster.Pods, generated.BoundPods...)
	cluster.Pods = append(cluster.Pods, generated.PendingPods...)

	hostPort := generated.PendingPods[0].DeepCopy()
	hostPort.Name += "-hostport"
	hostPort.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	hostPort.Spec.Containers[0].Ports = append(hostPort.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP})
	pinned := generated.BoundPods[1].DeepCopy()
	pinned.Name += "-pinned"
	pinned.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	resized := generated.BoundPods[2].DeepCopy()
	resized.Name += "-resized"
	grown := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6"), corev1.ResourceMemory: resource.MustParse("20Gi")}
	resized.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: grown}
	resized.Status.ContainerStatuses[0].AllocatedResources = grown
	// Two pods asking for one host port cannot share a node.
	hostPortToo := hostPort.DeepCopy()
	hostPortToo.Name += "-too"
	cluster.Pods = append(cluster.Pods, hostPort, hostPortToo, pinned, resized)

	// The first node is dedicated: tainted, and only a pod that tolerates
	// the taint and selects the node's label runs there.
	dedicated := generated.Nodes[0]
	dedicated.Spec.Taints = append(dedicated.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule})
	dedicated.Labels["dedicated"] = "ml"
	tolerant := generated.PendingPods[1].DeepCopy()
	tolerant.Name += "-tolerant"
	tolerant.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	tolerant.Spec.NodeSelector = map[string]string{"dedicated": "ml"}
	tolerant.Spec.Tolerations = append(tolerant.Spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule})
	cluster.Pods = append(cluster.Pods, tolerant)
	return cluster
}

// compacted is a deep copy of cluster with every object compacted.
func compacted(cluster snapshot.Cluster) snapshot.Cluster {
	var compactor snapshot.Compactor
	out := cluster
	out.Pods, out.Nodes, out.NodeClaims = nil, nil, nil
	for _, pod := range cluster.Pods {
		cp := pod.DeepCopy()
		compactor.Compact(cp)
		out.Pods = append(out.Pods, cp)
	}
	for _, node := range cluster.Nodes {
		cp := node.DeepCopy()
		compactor.Compact(cp)
		out.Nodes = append(out.Nodes, cp)
	}
	for _, claim := range cluster.NodeClaims {
		cp := claim.DeepCopy()
		compactor.Compact(cp)
		out.NodeClaims = append(out.NodeClaims, cp)
	}
	return out
}

func solvePlan(t *testing.T, cluster snapshot.Cluster, cat *catalog.Catalog) string {
	t.Helper()
	var out bytes.Buffer
	if err := plan.NewOutput(scheduler.Solve(cluster.Input(cat, snapshot.Offline)), 0).WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func disruptionPlan(t *testing.T, cluster snapshot.Cluster, cat *catalog.Catalog) string {
	t.Helper()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	moves, before, last := disruption.Replay(disruption.State{Cluster: &cluster, Catalog: cat, Now: now}, 5)
	var out bytes.Buffer
	if err := plan.NewDisruptionOutput(moves, before, last).WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestCompactKeepsDecisions: the scheduler and disruption decide the same
// on a cluster and on its compacted copy, so compacting drops nothing a
// pass reads. It fails if Compact drops a field the engine needs (try
// dropping tolerations, affinity, host ports or container statuses'
// resources).
func TestCompactKeepsDecisions(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	full := fixtureCluster(t)
	small := compacted(full)
	for _, tc := range []struct {
		name   string
		decide func(*testing.T, snapshot.Cluster, *catalog.Catalog) string
	}{
		{"solve", solvePlan},
		{"disruption", disruptionPlan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := tc.decide(t, full, cat), tc.decide(t, small, cat)
			if before != after {
				t.Errorf("compacting changed the decision:\nbefore: %s\nafter:  %s", before, after)
			}
			if len(before) < 100 || !strings.Contains(before, "-") {
				t.Errorf("the decision is empty (%q): the fixture decides nothing, so the comparison proves nothing", before)
			}
		})
	}
}

// TestCompactShares: replicas of one workload share their labels, owner
// references and containers after compacting, and what no pass reads is
// gone.
func TestCompactShares(t *testing.T) {
	cluster := compacted(fixtureCluster(t))
	var first, sibling *corev1.Pod
	byHash := map[string]*corev1.Pod{}
	for _, pod := range cluster.Pods {
		if prev := byHash[pod.Labels["pod-template-hash"]]; prev != nil {
			first, sibling = prev, pod
			break
		}
		byHash[pod.Labels["pod-template-hash"]] = pod
	}
	if sibling == nil {
		t.Fatal("the fixture has no two pods of one ReplicaSet")
	}
	for _, tc := range []struct {
		name   string
		shared bool
	}{
		{"labels", sameMap(first.Labels, sibling.Labels)},
		{"owner references", &first.OwnerReferences[0] == &sibling.OwnerReferences[0]},
		{"containers", &first.Spec.Containers[0] == &sibling.Spec.Containers[0]},
		{"tolerations", &first.Spec.Tolerations[0] == &sibling.Spec.Tolerations[0]},
	} {
		if !tc.shared {
			t.Errorf("%s of pods %s and %s are separate copies; want one shared value", tc.name, first.Name, sibling.Name)
		}
	}
	container := first.Spec.Containers[0]
	if first.ManagedFields != nil || container.Image != "" || container.Env != nil || container.ReadinessProbe != nil || first.Spec.Volumes != nil || first.Status.PodIP != "" {
		t.Errorf("compacted pod keeps what no pass reads: managedFields %d, image %q, env %v, probe %v, volumes %d, podIP %q",
			len(first.ManagedFields), container.Image, container.Env, container.ReadinessProbe, len(first.Spec.Volumes), first.Status.PodIP)
	}
}

// sameMap reports whether two maps are one map (writing to one shows in
// the other).
func sameMap(a, b map[string]string) bool {
	const probe = "\x00compact-test"
	a[probe] = "x"
	_, shared := b[probe]
	delete(a, probe)
	return shared
}
