package differential

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// TestRules: each check catches the rule it stands for on a hand-made
// plan, and passes the same plan made valid.
func TestRules(t *testing.T) {
	cat := testCatalog(t)
	pool := func(mutate func(*karpv1.NodePool)) *karpv1.NodePool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}}
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}
		if mutate != nil {
			mutate(np)
		}
		return np
	}
	pod := func(name, cpu string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{container(cpu, "1Gi")}}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	// node puts pods on one new node of the given type, zone, capacity type.
	node := func(p *plan, typ, zone string, pods ...*corev1.Pod) {
		p.New = append(p.New, &newNode{Name: fmt.Sprintf("n%d", len(p.New)), Pool: "alpha", Type: typeByName(cat, typ), Zone: zone,
			CapacityType: karpv1.CapacityTypeOnDemand, Options: []string{typ}, Requirements: scheduling.NewRequirements(), Pods: pods})
	}
	spread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	anti := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
	}
	for _, tc := range []struct {
		name      string
		pool      func(*karpv1.NodePool)
		bad, good func(p *plan)
		rule      string
	}{
		{name: "resources", rule: "resources",
			bad:  func(p *plan) { node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", nil), pod("b", "1", nil)) },
			good: func(p *plan) { node(p, "Standard_D4as_v5", "eastus-1", pod("a", "1", nil), pod("b", "1", nil)) }},
		{name: "daemon pods count where they tolerate the taints", rule: "resources",
			pool: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
			},
			bad:  func(p *plan) { node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1500m", nil)) },
			good: func(p *plan) { node(p, "Standard_D4as_v5", "eastus-1", pod("a", "1500m", nil)) }},
		{name: "node affinity", rule: "node-affinity",
			bad: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: "eastus-2"} }))
			},
			good: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-2", pod("a", "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: "eastus-2"} }))
			}},
		{name: "a custom label the NodePool does not define", rule: "undefined-label",
			bad: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "a"} }))
				p.New[0].Requirements = scheduling.NewRequirements(scheduling.NewRequirement("team", corev1.NodeSelectorOpIn, "a"))
			},
			good: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", func(p *corev1.Pod) {
					p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "team", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b"}}}}}}}}
				}))
			}},
		{name: "taints", rule: "taints",
			pool: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
			},
			bad: func(p *plan) { node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", nil)) },
			good: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", func(p *corev1.Pod) {
					p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}}
				}))
			}},
		{name: "spread counts zones the NodePool can launch in", rule: "spread",
			bad: func(p *plan) { node(p, "Standard_D4as_v5", "eastus-1", pod("a", "1", spread), pod("b", "1", spread)) },
			good: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", spread))
				node(p, "Standard_D2as_v5", "eastus-2", pod("b", "1", spread))
			}},
		{name: "pod affinity", rule: "pod-affinity",
			bad: func(p *plan) {
				aff := func(p *corev1.Pod) {
					p.Labels = map[string]string{"app": "client"}
					p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
				}
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", nil))
				node(p, "Standard_D2as_v5", "eastus-1", pod("b", "1", aff))
			},
			good: func(p *plan) {
				aff := func(p *corev1.Pod) {
					p.Labels = map[string]string{"app": "client"}
					p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
				}
				node(p, "Standard_D4as_v5", "eastus-1", pod("a", "1", nil), pod("b", "1", aff))
			}},
		{name: "anti-affinity", rule: "anti-affinity",
			bad: func(p *plan) { node(p, "Standard_D4as_v5", "eastus-1", pod("a", "1", anti), pod("b", "1", anti)) },
			good: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", anti))
				node(p, "Standard_D2as_v5", "eastus-1", pod("b", "1", anti))
			}},
		{name: "limits", rule: "limits",
			pool: func(np *karpv1.NodePool) { np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")} },
			bad:  func(p *plan) { node(p, "Standard_D8as_v5", "eastus-1", pod("a", "1", nil)) },
			good: func(p *plan) { node(p, "Standard_D4as_v5", "eastus-1", pod("a", "1", nil)) }},
		{name: "minValues", rule: "min-values",
			pool: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: new(2)}}
			},
			bad: func(p *plan) { node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", nil)) },
			good: func(p *plan) {
				node(p, "Standard_D2as_v5", "eastus-1", pod("a", "1", nil))
				p.New[0].Options = []string{"Standard_D2as_v5", "Standard_D4as_v5"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, valid := range []bool{false, true} {
				p := &plan{Who: "hand", OnExisting: map[string][]*corev1.Pod{}, Pending: map[string]string{}}
				if valid {
					tc.good(p)
				} else {
					tc.bad(p)
				}
				sc := &scenario{NodePools: []*karpv1.NodePool{pool(tc.pool)}}
				if tc.name == "daemon pods count where they tolerate the taints" {
					ds := &corev1.PodSpec{Containers: []corev1.Container{container("500m", "128Mi")}}
					sc.DaemonSets = append(sc.DaemonSets, daemonSet("ds0", ds))
				}
				for _, nn := range p.New {
					sc.Pods = append(sc.Pods, nn.Pods...)
				}
				broken := false
				for _, v := range check(sc, cat, p) {
					if v.Rule == tc.rule {
						broken = true
					} else {
						t.Errorf("unexpected %s", v)
					}
				}
				if broken == valid {
					t.Errorf("valid=%v: rule %s broken=%v\n%s", valid, tc.rule, broken, p)
				}
			}
		})
	}
}
