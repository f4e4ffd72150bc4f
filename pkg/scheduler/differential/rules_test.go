package differential

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// The rules below are kube-scheduler's and the kubelet's, written here
// from the Kubernetes documentation and API reference, not by calling
// either scheduler's code:
//   - resources: https://kubernetes.io/docs/concepts/scheduling-eviction/kube-scheduler/#filtering
//     (NodeResourcesFit), effective requests of a pod with init containers and
//     overhead: https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers
//     and https://kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead/
//   - node selection: https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/
//   - taints: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
//   - spread: https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
//   - DaemonSet pods: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/#how-daemon-pods-are-scheduled
//   - limits and minValues: https://karpenter.sh/docs/concepts/nodepools/
//   - undefined-label: "Pod scheduling constraints must fall within a
//     NodePool's constraints or the pods will not deploy"
//     (https://karpenter.sh/v1.0/concepts/scheduling/); a pod that
//     requires a custom label (not well known) that its NodePool defines
//     neither in its requirements nor its labels is not scheduled
//     (sigs.k8s.io/karpenter v1.14.1 pkg/scheduling/requirements.go
//     Compatible: "Custom Labels must intersect, but if not defined are
//     denied", NotIn and DoesNotExist excepted).

// violation is one rule a plan breaks.
type violation struct {
	Rule   string // resources, node-affinity, undefined-label, taints, spread, pod-affinity, anti-affinity, limits, min-values, plan
	Pod    string // "" for a node-level rule
	Node   string
	Detail string
}

func (v violation) String() string {
	if v.Pod == "" {
		return fmt.Sprintf("%s: node %s: %s", v.Rule, v.Node, v.Detail)
	}
	return fmt.Sprintf("%s: pod %s on %s: %s", v.Rule, v.Pod, v.Node, v.Detail)
}

// podRequests is a pod's effective request: per resource the larger of
// its containers' sum and its largest init container, plus overhead.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addTo(out, c.Resources.Requests)
	}
	for _, c := range pod.Spec.InitContainers {
		for name, q := range c.Resources.Requests {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	addTo(out, pod.Spec.Overhead)
	out[corev1.ResourcePods] = resource.MustParse("1")
	return out
}

func addTo(sum, add corev1.ResourceList) {
	for name, q := range add {
		cur := sum[name]
		cur.Add(q)
		sum[name] = cur
	}
}

// fits reports whether used+req stays within alloc for every resource req names.
func fits(alloc, used, req corev1.ResourceList) bool {
	for name, q := range req {
		total := used[name].DeepCopy()
		total.Add(q)
		limit, ok := alloc[name]
		if !ok || total.Cmp(limit) > 0 {
			if name == corev1.ResourcePods && !ok {
				continue
			}
			return false
		}
	}
	return true
}

// matchExpression is one node selector requirement against node labels.
func matchExpression(nodeLabels map[string]string, e corev1.NodeSelectorRequirement) bool {
	v, ok := nodeLabels[e.Key]
	switch e.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(e.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(e.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !ok || len(e.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(e.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if e.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// matchesNode is nodeSelector and required node affinity: every
// nodeSelector label, and at least one term whose expressions all match
// (a term without expressions matches no node).
func matchesNode(spec *corev1.PodSpec, nodeLabels map[string]string) bool {
	for k, v := range spec.NodeSelector {
		if nodeLabels[k] != v {
			return false
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		ok := true
		for _, e := range term.MatchExpressions {
			ok = ok && matchExpression(nodeLabels, e)
		}
		for _, f := range term.MatchFields {
			ok = ok && f.Key == "metadata.name" && matchExpression(map[string]string{f.Key: nodeLabels[corev1.LabelHostname]}, f)
		}
		if ok {
			return true
		}
	}
	return false
}

// undefinedLabel reports a custom label key the pod requires, by
// nodeSelector or with In, Exists, Gt or Lt in every required term that
// matches the node, that np defines neither in its requirements nor in
// its template labels (Karpenter's Requirements.Compatible rejects such a
// pod; NotIn and DoesNotExist need no definition).
func undefinedLabel(spec *corev1.PodSpec, nodeLabels map[string]string, np *karpv1.NodePool) (string, bool) {
	if np == nil {
		return "", false
	}
	defined := func(key string) bool {
		if _, ok := np.Spec.Template.Labels[key]; ok {
			return true
		}
		return slices.ContainsFunc(np.Spec.Template.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool { return r.Key == key })
	}
	for _, key := range slices.Sorted(maps.Keys(spec.NodeSelector)) {
		if isCustom(key) && !defined(key) {
			return key, true
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", false
	}
	first := ""
	for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if !matchesTerm(term, nodeLabels) {
			continue
		}
		missing := ""
		for _, e := range term.MatchExpressions {
			if e.Operator != corev1.NodeSelectorOpNotIn && e.Operator != corev1.NodeSelectorOpDoesNotExist && isCustom(e.Key) && !defined(e.Key) {
				missing = e.Key
				break
			}
		}
		if missing == "" {
			return "", false // a term the node meets needs no undefined label
		}
		if first == "" {
			first = missing
		}
	}
	return first, first != ""
}

// matchesTerm reports whether the node's labels meet one required term.
func matchesTerm(term corev1.NodeSelectorTerm, nodeLabels map[string]string) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, e := range term.MatchExpressions {
		if !matchExpression(nodeLabels, e) {
			return false
		}
	}
	for _, f := range term.MatchFields {
		if f.Key != "metadata.name" || !matchExpression(map[string]string{f.Key: nodeLabels[corev1.LabelHostname]}, f) {
			return false
		}
	}
	return true
}

// tolerates reports whether a toleration matches a taint.
func tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	for _, t := range tolerations {
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		if t.Key == "" {
			if t.Operator == corev1.TolerationOpExists {
				return true
			}
			continue
		}
		if t.Key != taint.Key {
			continue
		}
		if t.Operator == corev1.TolerationOpExists || t.Value == taint.Value {
			return true
		}
	}
	return false
}

// untolerated is the first NoSchedule or NoExecute taint the pod does
// not tolerate; PreferNoSchedule never keeps a pod off a node.
func untolerated(tolerations []corev1.Toleration, taints []corev1.Taint) (corev1.Taint, bool) {
	for _, taint := range taints {
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerates(tolerations, taint) {
			return taint, true
		}
	}
	return corev1.Taint{}, false
}

// daemonTolerations are the ones the DaemonSet controller adds to every
// daemon pod (pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations).
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// daemonRuns reports whether the DaemonSet controller runs a pod of ds on
// a node: its node selector and required affinity match the node and it
// tolerates the node's NoSchedule and NoExecute taints.
func daemonRuns(ds *appsv1.DaemonSet, nodeLabels map[string]string, taints []corev1.Taint) bool {
	spec := &ds.Spec.Template.Spec
	if !matchesNode(spec, nodeLabels) {
		return false
	}
	_, bad := untolerated(slices.Concat(spec.Tolerations, daemonTolerations), taints)
	return !bad
}

// node is a node of the cluster a plan leads to.
type node struct {
	Name        string
	Pool        string
	New         bool
	Type        *catalog.InstanceType // nil for an existing node
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
	Capacity    corev1.ResourceList
	Pods        []*corev1.Pod // every pod on it: bound, daemon and placed
	Placed      map[string]bool
}

// world is the cluster after a plan: existing nodes with their bound
// pods, new nodes with the daemon pods the DaemonSet controller would put
// there, and the pending pods where the plan puts them.
type world struct {
	Nodes []*node
	// Potential are the nodes some NodePool could launch (its
	// requirements, the instance types' offerings): their zones and
	// capacity types are spread domains as in Karpenter, so a zone with no
	// node yet is still a domain pods spread to.
	Potential []potentialNode
}

// potentialNode is a node some NodePool could launch.
type potentialNode struct {
	Pool   string
	Labels map[string]string
	Taints []corev1.Taint
}

func buildWorld(sc *scenario, cat *catalog.Catalog, p *plan) *world {
	w := &world{}
	for _, n := range sc.Nodes {
		wn := &node{Name: n.Name, Pool: n.Labels[karpv1.NodePoolLabelKey], Labels: n.Labels, Taints: n.Spec.Taints,
			Allocatable: n.Status.Allocatable, Capacity: n.Status.Capacity, Placed: map[string]bool{}}
		for _, pod := range sc.Bound {
			if pod.Spec.NodeName == n.Name {
				wn.Pods = append(wn.Pods, pod)
			}
		}
		for _, pod := range p.OnExisting[n.Name] {
			wn.Pods = append(wn.Pods, pod)
			wn.Placed[pod.Name] = true
		}
		w.Nodes = append(w.Nodes, wn)
	}
	for _, nn := range p.New {
		np := sc.poolByName(nn.Pool)
		wn := &node{Name: nn.Name, Pool: nn.Pool, New: true, Type: nn.Type, Labels: newNodeLabels(nn, np),
			Allocatable: nn.Type.Allocatable(), Capacity: nn.Type.Capacity, Placed: map[string]bool{}}
		if np != nil {
			wn.Taints = np.Spec.Template.Spec.Taints
		}
		for _, ds := range sc.DaemonSets {
			if daemonRuns(ds, wn.Labels, wn.Taints) {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + wn.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
					Spec: *ds.Spec.Template.Spec.DeepCopy()}
				wn.Pods = append(wn.Pods, pod)
			}
		}
		for _, pod := range nn.Pods {
			wn.Pods = append(wn.Pods, pod)
			wn.Placed[pod.Name] = true
		}
		w.Nodes = append(w.Nodes, wn)
	}
	for _, np := range sc.NodePools {
		for _, base := range cat.InstanceTypes {
			it := launchable(base)
			for _, o := range it.Offerings {
				if !o.Available {
					continue
				}
				l := potentialLabels(it, o, np)
				ok := true
				for _, req := range np.Spec.Template.Spec.Requirements {
					if _, custom := l[req.Key]; !custom && isCustom(req.Key) {
						continue
					}
					ok = ok && matchExpression(l, nodeRequirement(req))
				}
				if ok {
					w.Potential = append(w.Potential, potentialNode{Pool: np.Name, Labels: l, Taints: np.Spec.Template.Spec.Taints})
				}
			}
		}
	}
	return w
}

// isCustom is a label no instance type defines: a NodePool's own label.
func isCustom(key string) bool {
	return !karpv1.WellKnownLabels.Has(key)
}

func potentialLabels(it *catalog.InstanceType, o catalog.Offering, np *karpv1.NodePool) map[string]string {
	l := map[string]string{}
	for k, v := range it.Labels {
		l[k] = v
	}
	for k, v := range np.Spec.Template.Labels {
		l[k] = v
	}
	for _, req := range np.Spec.Template.Spec.Requirements {
		if isCustom(req.Key) && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) > 0 {
			l[req.Key] = slices.Min(req.Values)
		}
	}
	l[corev1.LabelTopologyZone] = o.Zone
	l[karpv1.CapacityTypeLabelKey] = o.CapacityType
	l[karpv1.NodePoolLabelKey] = np.Name
	return l
}

// newNodeLabels are the labels a launched claim's node carries: its
// instance type's, its zone and capacity type, the NodePool's template
// labels, and one value of each custom requirement the claim has (the
// first of In's values in order; a claim cannot know more).
func newNodeLabels(nn *newNode, np *karpv1.NodePool) map[string]string {
	l := map[string]string{}
	for k, v := range nn.Type.Labels {
		l[k] = v
	}
	if np != nil {
		for k, v := range np.Spec.Template.Labels {
			l[k] = v
		}
	}
	for _, key := range sortedKeys(nn.Requirements.Keys()) {
		if !isCustom(key) {
			continue
		}
		req := nn.Requirements.Get(key)
		if req.Operator() == corev1.NodeSelectorOpIn {
			values := req.Values()
			sort.Strings(values)
			l[key] = values[0]
		}
	}
	l[corev1.LabelTopologyZone] = nn.Zone
	l[karpv1.CapacityTypeLabelKey] = nn.CapacityType
	l[karpv1.NodePoolLabelKey] = nn.Pool
	l[corev1.LabelHostname] = nn.Name
	return l
}

func sortedKeys[T interface{ UnsortedList() []string }](s T) []string {
	out := s.UnsortedList()
	sort.Strings(out)
	return out
}

// check applies every rule to the cluster the plan leads to.
func check(sc *scenario, cat *catalog.Catalog, p *plan) []violation {
	var out []violation
	for _, why := range p.Invalid {
		out = append(out, violation{Rule: "plan", Detail: why})
	}
	w := buildWorld(sc, cat, p)
	for _, n := range w.Nodes {
		out = append(out, checkResources(n)...)
		for _, pod := range n.Pods {
			if !n.Placed[pod.Name] {
				continue
			}
			if !matchesNode(&pod.Spec, n.Labels) {
				out = append(out, violation{Rule: "node-affinity", Pod: pod.Name, Node: n.Name, Detail: fmt.Sprintf("node labels %v do not meet the pod's nodeSelector/required affinity", relevantLabels(n.Labels))})
			}
			if n.New {
				if key, undefined := undefinedLabel(&pod.Spec, n.Labels, sc.poolByName(n.Pool)); undefined {
					out = append(out, violation{Rule: "undefined-label", Pod: pod.Name, Node: n.Name,
						Detail: fmt.Sprintf("the pod requires label %q, which NodePool %s defines neither in its requirements nor its labels: Karpenter's own rule (Requirements.Compatible) does not schedule such a pod; here it does only because another pod's NotIn or DoesNotExist on the key came first into the claim's requirements, which depends on the order pods are tried", key, n.Pool)})
				}
			}
			if taint, bad := untolerated(pod.Spec.Tolerations, n.Taints); bad {
				out = append(out, violation{Rule: "taints", Pod: pod.Name, Node: n.Name, Detail: fmt.Sprintf("taint %s=%s:%s not tolerated", taint.Key, taint.Value, taint.Effect)})
			}
			out = append(out, checkSpread(w, n, pod)...)
			out = append(out, checkPodAffinity(w, n, pod)...)
		}
	}
	out = append(out, checkAntiAffinity(w)...)
	out = append(out, checkLimits(sc, w)...)
	out = append(out, checkMinValues(sc, cat, p)...)
	return out
}

func relevantLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if k == corev1.LabelTopologyZone || k == karpv1.CapacityTypeLabelKey || k == karpv1.NodePoolLabelKey || k == corev1.LabelInstanceTypeStable || isCustom(k) {
			out[k] = v
		}
	}
	return out
}

// checkResources: the requests of every pod on the node, daemon pods
// included, within its allocatable (cpu, memory, pods).
func checkResources(n *node) []violation {
	used := corev1.ResourceList{}
	for _, pod := range n.Pods {
		addTo(used, podRequests(pod))
	}
	var out []violation
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if q, limit := used[name], n.Allocatable[name]; q.Cmp(limit) > 0 {
			if len(n.Placed) == 0 {
				continue // over before the plan: not the plan's doing
			}
			out = append(out, violation{Rule: "resources", Node: n.Name, Detail: fmt.Sprintf("%s requested %s > allocatable %s (%d pods incl. daemons)", name, q.String(), limit.String(), len(n.Pods))})
		}
	}
	return out
}

func selects(sel *metav1.LabelSelector, pod *corev1.Pod) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(pod.Labels))
}

// checkSpread: for each DoNotSchedule constraint the node must have the
// key, and the pods the selector matches in the node's domain, minus the
// fewest in any eligible domain, at most maxSkew. Eligible domains are
// those of nodes, existing, planned or launchable by a NodePool, that
// meet the pod's nodeSelector and required node affinity
// (nodeAffinityPolicy Honor, the default). Taints do not narrow them
// under nodeTaintsPolicy Ignore, the default; under Honor a node whose
// NoSchedule or NoExecute taints the pod does not tolerate is neither a
// domain nor counted
// (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/#spread-constraint-definition).
// Hostname domains are the cluster's nodes only. Counting the final cluster this way is exact for
// the last pod put in a domain, the one that could break the skew.
func checkSpread(w *world, n *node, pod *corev1.Pod) []violation {
	var out []violation
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		domain, ok := n.Labels[c.TopologyKey]
		if !ok {
			out = append(out, violation{Rule: "spread", Pod: pod.Name, Node: n.Name, Detail: fmt.Sprintf("node has no %s label", c.TopologyKey)})
			continue
		}
		honorTaints := c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		excluded := func(taints []corev1.Taint) bool {
			_, bad := untolerated(pod.Spec.Tolerations, taints)
			return honorTaints && bad
		}
		counts := map[string]int{}
		for _, other := range w.Nodes {
			v, ok := other.Labels[c.TopologyKey]
			if !ok || !matchesNode(&pod.Spec, other.Labels) || excluded(other.Taints) {
				continue
			}
			counts[v] += 0
			for _, q := range other.Pods {
				if q.Namespace == pod.Namespace && selects(c.LabelSelector, q) {
					counts[v]++
				}
			}
		}
		if c.TopologyKey != corev1.LabelHostname {
			for _, pn := range w.Potential {
				if v, ok := pn.Labels[c.TopologyKey]; ok && matchesNode(&pod.Spec, pn.Labels) && !excluded(pn.Taints) {
					counts[v] += 0
				}
			}
		}
		least := -1
		for _, cnt := range counts {
			if least < 0 || cnt < least {
				least = cnt
			}
		}
		if skew := counts[domain] - least; skew > int(c.MaxSkew) {
			out = append(out, violation{Rule: "spread", Pod: pod.Name, Node: n.Name, Detail: fmt.Sprintf("%s skew %d > maxSkew %d (counts %v)", c.TopologyKey, skew, c.MaxSkew, counts)})
		}
	}
	return out
}

// checkPodAffinity: each required term is met by another pod in the
// node's domain, or the pod is the first of its kind (it matches its own
// term and no other pod does anywhere).
func checkPodAffinity(w *world, n *node, pod *corev1.Pod) []violation {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.PodAffinity == nil {
		return nil
	}
	var out []violation
	for _, term := range pod.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		domain, ok := n.Labels[term.TopologyKey]
		if !ok {
			out = append(out, violation{Rule: "pod-affinity", Pod: pod.Name, Node: n.Name, Detail: fmt.Sprintf("node has no %s label", term.TopologyKey)})
			continue
		}
		near, anywhere := false, false
		for _, other := range w.Nodes {
			for _, q := range other.Pods {
				if q == pod || q.Namespace != pod.Namespace || !selects(term.LabelSelector, q) {
					continue
				}
				anywhere = true
				if other.Labels[term.TopologyKey] == domain {
					near = true
				}
			}
		}
		if !near && (anywhere || !selects(term.LabelSelector, pod)) {
			out = append(out, violation{Rule: "pod-affinity", Pod: pod.Name, Node: n.Name, Detail: fmt.Sprintf("no pod matching %s in its %s %s", metav1.FormatLabelSelector(term.LabelSelector), term.TopologyKey, domain)})
		}
	}
	return out
}

// checkAntiAffinity: no two pods share a domain where one's required
// anti-affinity term selects the other, for pairs with a placed pod (the
// kube-scheduler checks the incoming pod's terms and the existing pods').
func checkAntiAffinity(w *world) []violation {
	type located struct {
		pod  *corev1.Pod
		node *node
	}
	var all []located
	for _, n := range w.Nodes {
		for _, pod := range n.Pods {
			all = append(all, located{pod, n})
		}
	}
	var out []violation
	for _, a := range all {
		if a.pod.Spec.Affinity == nil || a.pod.Spec.Affinity.PodAntiAffinity == nil {
			continue
		}
		for _, term := range a.pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			da, ok := a.node.Labels[term.TopologyKey]
			if !ok {
				continue
			}
			for _, b := range all {
				if b.pod == a.pod || (!a.node.Placed[a.pod.Name] && !b.node.Placed[b.pod.Name]) {
					continue
				}
				if b.pod.Namespace == a.pod.Namespace && selects(term.LabelSelector, b.pod) && b.node.Labels[term.TopologyKey] == da {
					out = append(out, violation{Rule: "anti-affinity", Pod: a.pod.Name, Node: a.node.Name,
						Detail: fmt.Sprintf("%s on %s shares %s %s", b.pod.Name, b.node.Name, term.TopologyKey, da)})
				}
			}
		}
	}
	return out
}

// checkLimits: per NodePool with limits, the capacity of its nodes,
// existing and new, within every limit (nodes counts nodes).
func checkLimits(sc *scenario, w *world) []violation {
	var out []violation
	for _, np := range sc.NodePools {
		if len(np.Spec.Limits) == 0 {
			continue
		}
		total := corev1.ResourceList{}
		grew := false
		for _, n := range w.Nodes {
			if n.Pool != np.Name {
				continue
			}
			grew = grew || n.New
			addTo(total, n.Capacity)
			addTo(total, corev1.ResourceList{"nodes": resource.MustParse("1")})
		}
		if !grew {
			continue
		}
		for name, limit := range np.Spec.Limits {
			if q := total[name]; q.Cmp(limit) > 0 {
				out = append(out, violation{Rule: "limits", Node: np.Name, Detail: fmt.Sprintf("NodePool %s: %s %s > limit %s", np.Name, name, q.String(), limit.String())})
			}
		}
	}
	return out
}

// checkMinValues: a new claim of a NodePool whose requirement has
// minValues keeps at least that many values of the key among its
// instance type options.
func checkMinValues(sc *scenario, cat *catalog.Catalog, p *plan) []violation {
	var out []violation
	for _, nn := range p.New {
		np := sc.poolByName(nn.Pool)
		if np == nil {
			continue
		}
		for _, req := range np.Spec.Template.Spec.Requirements {
			if req.MinValues == nil {
				continue
			}
			values := map[string]bool{}
			for _, name := range nn.Options {
				if v, ok := typeByName(cat, name).Labels[req.Key]; ok {
					values[v] = true
				}
			}
			if len(values) < *req.MinValues {
				out = append(out, violation{Rule: "min-values", Node: nn.Name, Detail: fmt.Sprintf("%d values of %s among options %v, minValues %d", len(values), req.Key, nn.Options, *req.MinValues)})
			}
		}
	}
	return out
}

// nodeRequirement is a NodePool requirement without its minValues.
func nodeRequirement(r karpv1.NodeSelectorRequirementWithMinValues) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}
}
