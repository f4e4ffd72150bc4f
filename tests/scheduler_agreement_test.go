package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/internal/localenv"
)

// TestSchedulerAgrees checks the engine against the real kube-scheduler: every
// pod the engine nominated for a new NodeClaim is bound by kube-scheduler to
// that NodeClaim's node, or to another node that satisfies the same
// constraints, and no pod the engine called schedulable stays pending.
func TestSchedulerAgrees(t *testing.T) {
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "agree", BootDelay: 2 * time.Second})
	ctx := context.Background()
	kube := env.Kube
	type workload struct {
		app      string
		replicas int32
		cpu, mem string
		mutate   func(*corev1.PodSpec, map[string]string)
	}
	workloads := []workload{
		{"generic", 6, "2", "3Gi", nil},
		{"zone-spread", 6, "500m", "512Mi", func(s *corev1.PodSpec, l map[string]string) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: l}}}
		}},
		{"host-anti", 3, "1", "1Gi", func(s *corev1.PodSpec, l map[string]string) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: l}}}}}
		}},
		{"on-demand", 4, "1", "2Gi", func(s *corev1.PodSpec, _ map[string]string) {
			s.NodeSelector = map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}
		}},
	}
	for _, w := range workloads {
		d := deployment(w.app, w.replicas, w.cpu, w.mem)
		if w.mutate != nil {
			w.mutate(&d.Spec.Template.Spec, d.Spec.Template.Labels)
		}
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range workloads {
		eventually(t, 3*time.Minute, w.app+" running", func() (bool, string) { return allRunning(ctx, kube, w.app, int(w.replicas)) })
	}

	nodes := map[string]corev1.Node{}
	var nodeList corev1.NodeList
	if err := kube.List(ctx, &nodeList); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodeList.Items {
		nodes[n.Name] = n
	}
	claimNode := map[string]string{}
	for _, nc := range nodeClaimList(t, ctx, kube) {
		claimNode[nc.Name] = nc.Status.NodeName
	}
	nominated := nominations(t, ctx, kube)
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	exact, equivalent := 0, 0
	for _, pod := range pods.Items {
		claim, ok := nominated[pod.UID]
		if !ok {
			continue // placed by kube-scheduler on capacity that already existed
		}
		want := claimNode[claim]
		if want == "" {
			t.Errorf("pod %s was nominated for NodeClaim %s, which has no node", pod.Name, claim)
			continue
		}
		if pod.Spec.NodeName == want {
			exact++
			continue
		}
		if why := violates(&pod, nodes[pod.Spec.NodeName], pods.Items, nodes); why != "" {
			t.Errorf("pod %s: engine chose node %s (NodeClaim %s), kube-scheduler bound it to %s, which %s", pod.Name, want, claim, pod.Spec.NodeName, why)
			continue
		}
		equivalent++
	}
	if exact+equivalent == 0 {
		t.Fatal("no pod carried a Nominated event from karpfunc")
	}
	t.Logf("%d pods bound to the node the engine chose, %d to an equally valid node", exact, equivalent)

	// The constraints hold on the final placement as a whole.
	for _, pod := range pods.Items {
		if why := violates(&pod, nodes[pod.Spec.NodeName], pods.Items, nodes); why != "" {
			t.Errorf("pod %s on node %s: %s", pod.Name, pod.Spec.NodeName, why)
		}
	}
	zones := map[string]int{}
	for _, pod := range pods.Items {
		if pod.Labels["app"] == "zone-spread" {
			zones[nodes[pod.Spec.NodeName].Labels[corev1.LabelTopologyZone]]++
		}
	}
	if minMax := spread(zones); minMax > 1 {
		t.Errorf("zone-spread pods are spread %v across zones: skew %d > maxSkew 1", zones, minMax)
	}
}

// nominations maps pod UID to the NodeClaim karpfunc's Nominated event names.
func nominations(t *testing.T, ctx context.Context, kube client.Client) map[types.UID]string {
	t.Helper()
	var evs corev1.EventList
	if err := kube.List(ctx, &evs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]string{}
	for _, e := range evs.Items {
		if e.Reason != "Nominated" || e.Source.Component != "karpfunc" {
			continue
		}
		if _, claim, ok := strings.Cut(e.Message, "nodeclaim/"); ok {
			out[e.InvolvedObject.UID] = strings.TrimSpace(claim)
		}
	}
	return out
}

// violates says which of the pod's own scheduling constraints node breaks,
// or "" when the node is a valid home for it.
func violates(pod *corev1.Pod, node corev1.Node, all []corev1.Pod, nodes map[string]corev1.Node) string {
	if node.Name == "" {
		return "does not exist"
	}
	if !labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(node.Labels)) {
		return fmt.Sprintf("does not match nodeSelector %v", pod.Spec.NodeSelector)
	}
	reqs := scheduling.NewStrictPodRequirements(pod)
	if err := scheduling.NewLabelRequirements(node.Labels).Compatible(reqs); err != nil {
		return "breaks required node affinity: " + err.Error()
	}
	if pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAntiAffinity != nil {
		for _, term := range pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, _ := metav1.LabelSelectorAsSelector(term.LabelSelector)
			for _, other := range all {
				if other.UID == pod.UID || other.Spec.NodeName == "" {
					continue
				}
				if sel.Matches(labels.Set(other.Labels)) && nodes[other.Spec.NodeName].Labels[term.TopologyKey] == node.Labels[term.TopologyKey] {
					return fmt.Sprintf("already runs %s, which its anti-affinity on %s forbids", other.Name, term.TopologyKey)
				}
			}
		}
	}
	if err := scheduling.Taints(node.Spec.Taints).ToleratesPod(pod); err != nil {
		return "has a taint the pod does not tolerate: " + err.Error()
	}
	return ""
}

func spread(counts map[string]int) int {
	lo, hi := -1, 0
	for _, c := range counts {
		if lo < 0 || c < lo {
			lo = c
		}
		if c > hi {
			hi = c
		}
	}
	if lo < 0 {
		return 0
	}
	return hi - lo
}
