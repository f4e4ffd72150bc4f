package differential

import (
	"fmt"
	"math/rand"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

const namespace = "default"

// gen draws one scenario from a seed. Every choice is a small realistic
// setting a NodePool or a workload has; the probabilities keep most
// scenarios solvable by both schedulers and every constraint frequent.
type gen struct {
	r *rand.Rand
	// policies draws the spread constraints' nodeTaintsPolicy from a
	// stream of its own, so adding it left every other draw of a seed
	// as it was.
	policies *rand.Rand
	cat      *catalog.Catalog
	sc       *scenario
	uid      int
}

func generate(seed int64, cat *catalog.Catalog) *scenario {
	g := &gen{r: rand.New(rand.NewSource(seed)), policies: rand.New(rand.NewSource(-seed)), cat: cat, sc: &scenario{Seed: seed}}
	g.nodePools()
	g.daemonSets()
	g.existingNodes()
	g.pendingPods()
	return g.sc
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *gen, s []T) T { return s[g.r.Intn(len(s))] }

// subset is a non-empty random subset of s, in s's order.
func subset[T any](g *gen, s []T) []T {
	for {
		var out []T
		for _, v := range s {
			if g.chance(0.5) {
				out = append(out, v)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
}

var poolNames = []string{"alpha", "bravo", "charlie"}

func (g *gen) nodePools() {
	n := 1 + g.r.Intn(3)
	for i := range n {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: poolNames[i]}}
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}
		if g.chance(0.5) {
			np.Spec.Weight = new(pick(g, []int32{10, 10, 50}))
		}
		spec := &np.Spec.Template.Spec
		spec.Requirements = append(spec.Requirements, requirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn,
			pick(g, [][]string{{karpv1.CapacityTypeOnDemand}, {karpv1.CapacityTypeSpot}, {karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}})...))
		if g.chance(0.25) {
			spec.Requirements = append(spec.Requirements, requirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, subset(g, g.cat.Zones)...))
		}
		switch {
		case g.chance(0.3):
			spec.Requirements = append(spec.Requirements, requirement(catalog.LabelSKUFamily, corev1.NodeSelectorOpIn, subset(g, []string{"B", "D", "E", "F"})...))
		case g.chance(0.15):
			req := requirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, subset(g, sizes)...)
			if len(req.Values) >= 2 && g.chance(0.7) {
				req.MinValues = new(2 + g.r.Intn(min(2, len(req.Values)-1)))
			}
			spec.Requirements = append(spec.Requirements, req)
		case g.chance(0.15):
			spec.Requirements = append(spec.Requirements, requirement(catalog.LabelSKUFamily, corev1.NodeSelectorOpIn, "D", "E", "F"))
			spec.Requirements[len(spec.Requirements)-1].MinValues = new(2)
		}
		if g.chance(0.25) {
			np.Spec.Template.Labels = map[string]string{"team": pick(g, []string{"a", "b"})}
		}
		if g.chance(0.1) {
			spec.Requirements = append(spec.Requirements, requirement("workload", corev1.NodeSelectorOpIn, subset(g, []string{"web", "batch"})...))
		}
		if g.chance(0.25) {
			spec.Taints = []corev1.Taint{{Key: "dedicated", Value: np.Name, Effect: pick(g, []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule})}}
		}
		if g.chance(0.2) {
			np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(pick(g, []string{"4", "8", "16", "32"}))}
			if g.chance(0.5) {
				np.Spec.Limits[corev1.ResourceMemory] = resource.MustParse(pick(g, []string{"16Gi", "32Gi", "64Gi"}))
			}
		}
		g.sc.NodePools = append(g.sc.NodePools, np)
	}
}

func requirement(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func (g *gen) daemonSets() {
	if !g.chance(0.5) {
		return
	}
	n := 1 + g.r.Intn(2)
	for i := range n {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ds%d", i), Namespace: namespace, UID: types.UID(fmt.Sprintf("ds-%d-%d", g.sc.Seed, i))}}
		ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"ds": ds.Name}}
		ds.Spec.Template.Labels = map[string]string{"ds": ds.Name}
		ds.Spec.Template.Spec.Containers = []corev1.Container{container(pick(g, []string{"100m", "200m", "500m"}), pick(g, []string{"128Mi", "256Mi", "512Mi"}))}
		if g.chance(0.5) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		if g.chance(0.2) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}
		}
		g.sc.DaemonSets = append(g.sc.DaemonSets, ds)
	}
}

func container(cpu, memory string) corev1.Container {
	return corev1.Container{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}
}

// existingNodes adds up to two running nodes launched earlier from the
// NodePools, with their NodeClaims, DaemonSet pods and a few pods.
func (g *gen) existingNodes() {
	if !g.chance(0.3) {
		return
	}
	n := 1 + g.r.Intn(2)
	for i := range n {
		np := pick(g, g.sc.NodePools)
		it, offering, ok := g.launchableFor(np)
		if !ok {
			continue
		}
		name := fmt.Sprintf("node-%d", i)
		labels := map[string]string{}
		for k, v := range it.Labels {
			labels[k] = v
		}
		for k, v := range np.Spec.Template.Labels {
			labels[k] = v
		}
		for _, req := range np.Spec.Template.Spec.Requirements {
			if req.Key == "workload" {
				labels[req.Key] = req.Values[0]
			}
		}
		labels[corev1.LabelTopologyZone] = offering.Zone
		labels[karpv1.CapacityTypeLabelKey] = offering.CapacityType
		labels[karpv1.NodePoolLabelKey] = np.Name
		labels[corev1.LabelHostname] = name
		labels[karpv1.NodeRegisteredLabelKey] = "true"
		labels[karpv1.NodeInitializedLabelKey] = "true"
		providerID := "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/" + name
		alloc := it.Allocatable()
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID, Taints: np.Spec.Template.Spec.Taints},
			Status: corev1.NodeStatus{Capacity: it.Capacity.DeepCopy(), Allocatable: alloc.DeepCopy(),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		nc.Spec.NodeClassRef = np.Spec.Template.Spec.NodeClassRef
		nc.Spec.Taints = np.Spec.Template.Spec.Taints
		nc.Status = karpv1.NodeClaimStatus{ProviderID: providerID, NodeName: name, Capacity: it.Capacity.DeepCopy(), Allocatable: alloc.DeepCopy()}
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
		nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
		g.sc.Nodes = append(g.sc.Nodes, node)
		g.sc.NodeClaims = append(g.sc.NodeClaims, nc)
		used := corev1.ResourceList{}
		for _, ds := range g.sc.DaemonSets {
			if daemonRuns(ds, node.Labels, node.Spec.Taints) {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + name, Namespace: namespace, UID: g.nextUID(), Labels: ds.Spec.Template.Labels,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)}}},
					Spec: *ds.Spec.Template.Spec.DeepCopy(), Status: corev1.PodStatus{Phase: corev1.PodRunning}}
				pod.Spec.NodeName = name
				g.sc.Bound = append(g.sc.Bound, pod)
				addTo(used, podRequests(pod))
			}
		}
		for j := range g.r.Intn(4) {
			pod := g.pod(fmt.Sprintf("run-%d-%d", i, j), pick(g, []string{"app=g0", "app=g1", "app=other"}))
			pod.Spec.NodeName = name
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning}
			req := podRequests(pod)
			if !fits(alloc, used, req) {
				continue
			}
			addTo(used, req)
			g.sc.Bound = append(g.sc.Bound, pod)
		}
	}
}

// launchableFor picks an instance type and offering the NodePool's
// requirements allow.
func (g *gen) launchableFor(np *karpv1.NodePool) (*catalog.InstanceType, catalog.Offering, bool) {
	type choice struct {
		it *catalog.InstanceType
		o  catalog.Offering
	}
	var choices []choice
	for _, base := range g.cat.InstanceTypes {
		it := launchable(base)
		for _, o := range it.Offerings {
			labels := map[string]string{corev1.LabelTopologyZone: o.Zone, karpv1.CapacityTypeLabelKey: o.CapacityType}
			for k, v := range it.Labels {
				labels[k] = v
			}
			ok := true
			for _, req := range np.Spec.Template.Spec.Requirements {
				if req.Key == "workload" {
					continue
				}
				if !matchExpression(labels, nodeRequirement(req)) {
					ok = false
				}
			}
			if ok && o.Available {
				choices = append(choices, choice{it, o})
			}
		}
	}
	if len(choices) == 0 {
		return nil, catalog.Offering{}, false
	}
	c := pick(g, choices)
	return c.it, c.o, true
}

func (g *gen) nextUID() types.UID {
	g.uid++
	return types.UID(fmt.Sprintf("pod-%d-%d", g.sc.Seed, g.uid))
}

// pod is a workload pod with one container and a label app=<group>.
func (g *gen) pod(name, label string) *corev1.Pod {
	app := label[len("app="):]
	cpu := pick(g, []string{"100m", "250m", "500m", "500m", "1", "1", "1500m", "2", "3"})
	memory := pick(g, []string{"128Mi", "512Mi", "1Gi", "2Gi", "4Gi", "7Gi"})
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: g.nextUID(), Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{container(cpu, memory)}}}
}

// pendingPods adds one to four workloads of one to four replicas each;
// a workload's replicas share their spec, as a Deployment's do.
func (g *gen) pendingPods() {
	groups := 1 + g.r.Intn(4)
	for i := range groups {
		app := fmt.Sprintf("g%d", i)
		template := g.pod("", "app="+app)
		g.constrain(template, app, groups)
		for j := range 1 + g.r.Intn(4) {
			pod := template.DeepCopy()
			pod.Name = fmt.Sprintf("%s-%d", app, j)
			pod.UID = g.nextUID()
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
			g.sc.Pods = append(g.sc.Pods, pod)
		}
	}
}

// constrain adds the workload's scheduling constraints.
func (g *gen) constrain(pod *corev1.Pod, app string, groups int) {
	spec := &pod.Spec
	if g.chance(0.15) {
		c := spec.Containers[0].Resources.Requests
		spec.InitContainers = []corev1.Container{container(pick(g, []string{"500m", "1", "2", "4"}), c.Memory().String())}
		spec.InitContainers[0].Name = "init"
	}
	if g.chance(0.1) {
		spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("120Mi")}
	}
	if g.chance(0.15) {
		spec.NodeSelector = pick(g, []map[string]string{
			{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot},
			{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand},
			{corev1.LabelTopologyZone: pick(g, g.cat.Zones)},
			{"team": "a"},
			{"workload": "web"},
			{corev1.LabelArchStable: "amd64"},
		})
	}
	affinity := &corev1.Affinity{}
	if g.chance(0.15) {
		exprs := pick(g, [][]corev1.NodeSelectorRequirement{
			{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: subset(g, g.cat.Zones)}},
			{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}},
			{{Key: catalog.LabelSKUFamily, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"B"}}},
			{{Key: "team", Operator: corev1.NodeSelectorOpExists}, {Key: "team", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b"}}},
			{{Key: catalog.LabelSKUCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}}},
		})
		affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}
	}
	if g.chance(0.15) {
		if affinity.NodeAffinity == nil {
			affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		expr := pick(g, []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{pick(g, g.cat.Zones)}},
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot}},
			{Key: "workload", Operator: corev1.NodeSelectorOpIn, Values: []string{"batch"}},
		})
		affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 50,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr}}}}
	}
	self := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	if g.chance(0.25) {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           int32(1 + g.r.Intn(2)),
			TopologyKey:       pick(g, []string{corev1.LabelTopologyZone, corev1.LabelTopologyZone, corev1.LabelHostname, karpv1.CapacityTypeLabelKey}),
			WhenUnsatisfiable: pick(g, []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.DoNotSchedule, corev1.DoNotSchedule, corev1.ScheduleAnyway}),
			LabelSelector:     self,
		}}
		if g.policies.Float64() < 0.3 {
			honor := corev1.NodeInclusionPolicyHonor
			spec.TopologySpreadConstraints[0].NodeTaintsPolicy = &honor
		}
	}
	if g.chance(0.12) {
		target := self
		if groups > 1 && g.chance(0.6) {
			target = &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("g%d", g.r.Intn(groups))}}
		}
		affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: target, TopologyKey: pick(g, []string{corev1.LabelHostname, corev1.LabelTopologyZone})}}}
	}
	if g.chance(0.15) {
		term := corev1.PodAffinityTerm{LabelSelector: self, TopologyKey: pick(g, []string{corev1.LabelHostname, corev1.LabelHostname, corev1.LabelTopologyZone})}
		if g.chance(0.75) {
			affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
		} else {
			affinity.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 50, PodAffinityTerm: term}}}
		}
	}
	if affinity.NodeAffinity != nil || affinity.PodAffinity != nil || affinity.PodAntiAffinity != nil {
		spec.Affinity = affinity
	}
	if g.chance(0.4) {
		var tainted []*karpv1.NodePool
		for _, np := range g.sc.NodePools {
			if len(np.Spec.Template.Spec.Taints) > 0 {
				tainted = append(tainted, np)
			}
		}
		if len(tainted) > 0 {
			taint := pick(g, tainted).Spec.Template.Spec.Taints[0]
			spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
		} else if g.chance(0.3) {
			spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}
	}
}

// daemonSet is a DaemonSet running spec.
func daemonSet(name string, spec *corev1.PodSpec) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"ds": name}}
	ds.Spec.Template.Labels = map[string]string{"ds": name}
	ds.Spec.Template.Spec = *spec
	return ds
}
