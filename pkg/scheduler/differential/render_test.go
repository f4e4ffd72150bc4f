package differential

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// render writes a scenario as short YAML-like text: what a person needs
// to rebuild it by hand (the objects' scheduling fields only).
func render(sc *scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# seed %d\nnodePools:\n", sc.Seed)
	for _, np := range sc.NodePools {
		fmt.Fprintf(&b, "- name: %s\n", np.Name)
		if np.Spec.Weight != nil {
			fmt.Fprintf(&b, "  weight: %d\n", *np.Spec.Weight)
		}
		for _, r := range np.Spec.Template.Spec.Requirements {
			mv := ""
			if r.MinValues != nil {
				mv = fmt.Sprintf(" minValues %d", *r.MinValues)
			}
			fmt.Fprintf(&b, "  requirement: %s %s %v%s\n", r.Key, r.Operator, r.Values, mv)
		}
		if len(np.Spec.Template.Labels) > 0 {
			fmt.Fprintf(&b, "  labels: %v\n", np.Spec.Template.Labels)
		}
		for _, t := range np.Spec.Template.Spec.Taints {
			fmt.Fprintf(&b, "  taint: %s=%s:%s\n", t.Key, t.Value, t.Effect)
		}
		if len(np.Spec.Limits) > 0 {
			fmt.Fprintf(&b, "  limits: %s\n", resourcesText(corev1.ResourceList(np.Spec.Limits)))
		}
	}
	if len(sc.DaemonSets) > 0 {
		b.WriteString("daemonSets:\n")
		for _, ds := range sc.DaemonSets {
			fmt.Fprintf(&b, "- name: %s\n  requests: %s\n", ds.Name, resourcesText(podRequestsNoSlot(&corev1.Pod{Spec: ds.Spec.Template.Spec})))
			writeSpec(&b, &ds.Spec.Template.Spec)
		}
	}
	if len(sc.Nodes) > 0 {
		b.WriteString("existingNodes:\n")
		for _, n := range sc.Nodes {
			fmt.Fprintf(&b, "- name: %s\n  nodePool: %s\n  instanceType: %s\n  zone: %s\n  capacityType: %s\n", n.Name, n.Labels[karpv1.NodePoolLabelKey],
				n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone], n.Labels[karpv1.CapacityTypeLabelKey])
			for _, p := range sc.Bound {
				if p.Spec.NodeName == n.Name {
					fmt.Fprintf(&b, "  pod: %s labels %v requests %s\n", p.Name, p.Labels, resourcesText(podRequestsNoSlot(p)))
				}
			}
		}
	}
	b.WriteString("pendingPods:\n")
	for _, p := range sc.Pods {
		fmt.Fprintf(&b, "- name: %s\n  labels: %v\n  requests: %s\n", p.Name, p.Labels, resourcesText(podRequestsNoSlot(p)))
		for _, c := range p.Spec.InitContainers {
			fmt.Fprintf(&b, "  initContainer: %s\n", resourcesText(c.Resources.Requests))
		}
		if len(p.Spec.Overhead) > 0 {
			fmt.Fprintf(&b, "  overhead: %s\n", resourcesText(p.Spec.Overhead))
		}
		writeSpec(&b, &p.Spec)
	}
	return b.String()
}

func podRequestsNoSlot(p *corev1.Pod) corev1.ResourceList {
	r := podRequests(p)
	delete(r, corev1.ResourcePods)
	return r
}

func resourcesText(r corev1.ResourceList) string {
	var parts []string
	for name, q := range r {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// writeSpec writes a pod spec's scheduling constraints.
func writeSpec(b *strings.Builder, spec *corev1.PodSpec) {
	if len(spec.NodeSelector) > 0 {
		fmt.Fprintf(b, "  nodeSelector: %v\n", spec.NodeSelector)
	}
	for _, t := range spec.Tolerations {
		fmt.Fprintf(b, "  toleration: %s %s %s %s\n", t.Key, t.Operator, t.Value, t.Effect)
	}
	if a := spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil {
			if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				for _, term := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					fmt.Fprintf(b, "  requiredNodeAffinity: %s\n", exprsText(term.MatchExpressions))
				}
			}
			for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				fmt.Fprintf(b, "  preferredNodeAffinity: weight %d %s\n", p.Weight, exprsText(p.Preference.MatchExpressions))
			}
		}
		if pa := a.PodAffinity; pa != nil {
			for _, t := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				fmt.Fprintf(b, "  requiredPodAffinity: %s on %s\n", metav1.FormatLabelSelector(t.LabelSelector), t.TopologyKey)
			}
		}
		if aa := a.PodAntiAffinity; aa != nil {
			for _, t := range aa.RequiredDuringSchedulingIgnoredDuringExecution {
				fmt.Fprintf(b, "  requiredPodAntiAffinity: %s on %s\n", metav1.FormatLabelSelector(t.LabelSelector), t.TopologyKey)
			}
			for _, t := range aa.PreferredDuringSchedulingIgnoredDuringExecution {
				fmt.Fprintf(b, "  preferredPodAntiAffinity: weight %d %s on %s\n", t.Weight, metav1.FormatLabelSelector(t.PodAffinityTerm.LabelSelector), t.PodAffinityTerm.TopologyKey)
			}
		}
	}
	for _, c := range spec.TopologySpreadConstraints {
		policy := ""
		if c.NodeTaintsPolicy != nil {
			policy = " nodeTaintsPolicy " + string(*c.NodeTaintsPolicy)
		}
		fmt.Fprintf(b, "  topologySpread: %s maxSkew %d %s %s%s\n", c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable, metav1.FormatLabelSelector(c.LabelSelector), policy)
	}
}

func exprsText(exprs []corev1.NodeSelectorRequirement) string {
	var parts []string
	for _, e := range exprs {
		parts = append(parts, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
	}
	return strings.Join(parts, " AND ")
}
