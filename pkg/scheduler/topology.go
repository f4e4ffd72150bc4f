package scheduler

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// Topology keys fall in four kinds. Zones, capacity types and custom label
// values are small sets held as bit masks (at most 64 values per key);
// hostname domains are bins (one node each).
type keyKind uint8

const (
	keyZone keyKind = iota
	keyCapacityType
	keyHostname
	keyCustom
)

const maxDomains = 64

// domains interns the values of every topology key.
type domains struct {
	zones   []string
	zoneIdx map[string]int
	custom  map[string]*valueTable
}

type valueTable struct {
	values []string
	index  map[string]int
}

func (t *valueTable) intern(v string) int {
	if i, ok := t.index[v]; ok {
		return i
	}
	if len(t.values) >= maxDomains {
		return -1
	}
	t.index[v] = len(t.values)
	t.values = append(t.values, v)
	return len(t.values) - 1
}

func (d *domains) zone(z string) int {
	if i, ok := d.zoneIdx[z]; ok {
		return i
	}
	if len(d.zones) >= 32 { // offering bits are zone*2+ct in 64 bits
		return -1
	}
	d.zoneIdx[z] = len(d.zones)
	d.zones = append(d.zones, z)
	return len(d.zones) - 1
}

func (d *domains) table(key string) *valueTable {
	table := d.custom[key]
	if table == nil {
		table = &valueTable{index: map[string]int{}}
		d.custom[key] = table
	}
	return table
}

func kindOf(key string) keyKind {
	switch key {
	case corev1.LabelTopologyZone:
		return keyZone
	case karpv1.CapacityTypeLabelKey:
		return keyCapacityType
	case corev1.LabelHostname:
		return keyHostname
	}
	return keyCustom
}

// counter counts pods per domain of one topology key: the pods matching a
// selector in some namespaces (for spread, affinity and anti-affinity), or,
// when owners is set, the pods that carry a required anti-affinity term with
// that selector (pods matching it must stay out of those domains).
type counter struct {
	key      string
	kind     keyKind
	owners   bool
	allNS    bool
	ns       []string
	selector labels.Selector
	// counts per domain index; for hostname, per bin id.
	counts []int32
	total  int32
	desc   string
	// filtered: the counter counts only pods on existing nodes and
	// in-flight claims that meet one of filter's requirement sets (a
	// spread constraint's nodeSelector and required node affinity terms
	// under nodeAffinityPolicy Honor). Pods on new claims are counted
	// whatever the claim's requirements, as Karpenter counts a claim whose
	// requirements are compatible with the filter.
	filtered bool
	filter   []scheduling.Requirements
	// honorTaints: the counter counts only pods on nodes and claims whose
	// NoSchedule and NoExecute taints tolerations tolerate (a spread
	// constraint's pod under nodeTaintsPolicy Honor).
	honorTaints bool
	tolerations []corev1.Toleration
}

func (c *counter) count(d int) int32 {
	if d < len(c.counts) {
		return c.counts[d]
	}
	return 0
}

func (c *counter) add(d int, n int32) {
	if d >= len(c.counts) {
		c.counts = append(c.counts, make([]int32, d+1-len(c.counts))...)
	}
	c.counts[d] += n
	c.total += n
}

func (c *counter) matches(ns string, l labels.Set) bool {
	if !c.allNS && !slices.Contains(c.ns, ns) {
		return false
	}
	return c.selector.Matches(l)
}

// counters interns counters by what they count.
type counters struct {
	byKey map[string]*counter
	all   []*counter
	// nsLabels are the labels of every known namespace, for terms with a
	// namespaceSelector.
	nsLabels map[string]labels.Set
	// nsNames are nsLabels' keys, sorted, so that selected lists (and so
	// counter identities) are deterministic.
	nsNames []string
	// filters are the pods' topology node filters (see nodeFilterOf),
	// spreads the counters of their spread constraints (see spreadCounter).
	filters map[*corev1.Pod][]scheduling.Requirements
	spreads map[spreadKey]*counter
}

// forTerm returns the counter for an affinity term of a pod in namespace ns,
// with Kubernetes' namespace semantics: no namespaces and no selector mean
// the pod's own namespace; a selector {} means every namespace; otherwise
// the listed namespaces together with those whose labels the selector
// matches.
func (cs *counters) forTerm(t corev1.PodAffinityTerm, ns string, owners bool) (*counter, error) {
	var nss []string
	allNS := false
	switch {
	case t.NamespaceSelector != nil && len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0:
		allNS = true // {} selects every namespace
	case t.NamespaceSelector != nil:
		sel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
		nss = slices.Clone(t.Namespaces)
		for _, name := range cs.nsNames {
			if sel.Matches(cs.nsLabels[name]) {
				nss = append(nss, name)
			}
		}
	case len(t.Namespaces) > 0:
		nss = slices.Clone(t.Namespaces)
	default:
		nss = []string{ns}
	}
	slices.Sort(nss)
	nss = slices.Compact(nss)
	return cs.get(t.TopologyKey, t.LabelSelector, nil, allNS, nss, owners)
}

// forSpread returns the counter for a topology spread constraint of pod in
// namespace ns. Under nodeAffinityPolicy Honor (the default) the
// kube-scheduler's PodTopologySpread counts matching pods only on nodes
// that meet the pod's nodeSelector and required node affinity
// (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/#spread-constraint-definition),
// as Karpenter's TopologyNodeFilter does when it counts existing pods; so
// a pod with such constraints counts through a counter of its own filter.
func (cs *counters) forSpread(pod *corev1.Pod, ns string, tsc corev1.TopologySpreadConstraint) (*counter, error) {
	var filter []scheduling.Requirements
	filtered := false
	if tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy != corev1.NodeInclusionPolicyIgnore {
		filter = cs.nodeFilterOf(pod)
		// A lone empty set admits every node: the shared counter.
		filtered = len(filter) != 1 || len(filter[0]) != 0
	}
	if !filtered {
		filter = nil
	}
	counter, err := cs.getFiltered(tsc.TopologyKey, tsc.LabelSelector, matchLabelValues(pod, tsc.MatchLabelKeys), false, []string{ns}, false, filter, filtered,
		tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor, pod.Spec.Tolerations)
	return counter, err
}

// setNamespaces records the labels of the namespaces in the snapshot, and
// of those pods use, for namespaceSelector terms.
func (cs *counters) setNamespaces(nss []*corev1.Namespace, pods ...[]*corev1.Pod) {
	cs.nsLabels = map[string]labels.Set{}
	for _, namespace := range nss {
		if namespace == nil || namespace.Name == "" {
			continue
		}
		withName := labels.Set{}
		for key, value := range namespace.Labels {
			withName[key] = value
		}
		// The API server sets it on every namespace; a hand-written
		// manifest may leave it out.
		withName[corev1.LabelMetadataName] = namespace.Name
		cs.nsLabels[namespace.Name] = withName
	}
	for _, ps := range pods {
		cs.addPodNamespaces(ps)
	}
	cs.nsNames = make([]string, 0, len(cs.nsLabels))
	for name := range cs.nsLabels {
		cs.nsNames = append(cs.nsNames, name)
	}
	slices.Sort(cs.nsNames)
}

// addPodNamespaces records the namespaces of pods not yet known, with
// only their name label. A pod in the namespace of the pod before it (the
// API server lists pods namespace by namespace) needs no lookup.
func (cs *counters) addPodNamespaces(pods []*corev1.Pod) {
	previous := ""
	for _, pod := range pods {
		if pod == nil || (pod.Namespace == previous && previous != "") {
			continue
		}
		previous = pod.Namespace
		if _, ok := cs.nsLabels[pod.Namespace]; !ok {
			cs.nsLabels[pod.Namespace] = labels.Set{corev1.LabelMetadataName: pod.Namespace}
		}
	}
}

func (cs *counters) get(key string, ls *metav1.LabelSelector, extra map[string]string, allNS bool, nss []string, owners bool) (*counter, error) {
	return cs.getFiltered(key, ls, extra, allNS, nss, owners, nil, false, false, nil)
}

// getFiltered is get for a counter that, when filtered, counts pods only
// on existing nodes that meet filter (see counter.filter), and, when
// honorTaints, only on nodes whose NoSchedule and NoExecute taints
// tolerations tolerate.
func (cs *counters) getFiltered(key string, ls *metav1.LabelSelector, extra map[string]string, allNS bool, nss []string, owners bool,
	filter []scheduling.Requirements, filtered, honorTaints bool, tolerations []corev1.Toleration) (*counter, error) {
	sel := labels.Nothing()
	if ls != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(ls); err != nil {
			return nil, err
		}
		if len(extra) > 0 {
			reqs, _ := labels.SelectorFromSet(extra).Requirements()
			sel = sel.Add(reqs...)
		}
	}
	// labels.Nothing() and labels.Everything() both print as "": Empty
	// tells a term without a labelSelector (no pod) from one with {}
	// (every pod).
	id := fmt.Sprintf("%t|%s|%t|%s|%t|%s", owners, key, allNS, strings.Join(nss, ","), sel.Empty(), sel.String())
	if filtered {
		filterKeys := make([]string, len(filter))
		for i, reqs := range filter {
			filterKeys[i] = requirementsKey(reqs)
		}
		id += "|on nodes " + strings.Join(filterKeys, " or ")
	}
	if honorTaints {
		id += fmt.Sprintf("|tolerating %v", tolerations)
	}
	if counter, ok := cs.byKey[id]; ok {
		return counter, nil
	}
	tally := &counter{key: key, kind: kindOf(key), owners: owners, allNS: allNS, ns: nss, selector: sel, filter: filter, filtered: filtered,
		honorTaints: honorTaints, tolerations: tolerations}
	tally.desc = fmt.Sprintf("%s pods matching %q", key, sel.String())
	cs.byKey[id] = tally
	cs.all = append(cs.all, tally)
	return tally, nil
}

type constraintKind uint8

const (
	spread constraintKind = iota
	affinity
	antiAffinity
	// blocked: pods matching a placed pod's required anti-affinity.
	blocked
)

// constraint is one topology rule a pod variant must satisfy.
type constraint struct {
	kind       constraintKind
	c          *counter
	maxSkew    int32
	minDomains int32
	// self is 1 when the pod matches the counter's selector.
	self        int32
	honorTaints bool
	// ignoreAffinity is nodeAffinityPolicy Ignore: the domains the spread
	// counts come from every NodePool and node, not only those the pod's
	// nodeSelector and required node affinity allow.
	ignoreAffinity bool
	desc           string
	// universe caches the domains a spread constraint counts (mask), per
	// variant; valid once universeSet.
	universe    uint64
	universeSet bool
	// hostMin caches hostMinimum while no pod has been committed since
	// (hostMinAt is the solver's commit count then, plus one).
	hostMin   int32
	hostMinAt int
}

func popcount(m uint64) int { return bits.OnesCount64(m) }

// spreadCounter is forSpread for a pod's constraint, found again without
// building the counter's identity: a group's pod asks for each of its
// variants.
func (cs *counters) spreadCounter(pod *corev1.Pod, ns string, tsc corev1.TopologySpreadConstraint) (*counter, error) {
	key := spreadKey{pod: pod, ns: ns, topologyKey: tsc.TopologyKey, selector: tsc.LabelSelector, matchLabelKeys: strings.Join(tsc.MatchLabelKeys, ",")}
	if tsc.NodeAffinityPolicy != nil {
		key.affinityPolicy = *tsc.NodeAffinityPolicy
	}
	if tsc.NodeTaintsPolicy != nil {
		key.taintsPolicy = *tsc.NodeTaintsPolicy
	}
	if known, ok := cs.spreads[key]; ok {
		return known, nil
	}
	tally, err := cs.forSpread(pod, ns, tsc)
	if err != nil {
		return nil, err
	}
	if cs.spreads == nil {
		cs.spreads = map[spreadKey]*counter{}
	}
	cs.spreads[key] = tally
	return tally, nil
}

// spreadKey is everything a spread constraint's counter depends on: the
// pod (its labels for matchLabelKeys, its node filter, its tolerations),
// the namespace, and the constraint's key, selector (by address: the
// pod's own), matchLabelKeys and inclusion policies.
type spreadKey struct {
	pod                          *corev1.Pod
	ns                           string
	topologyKey                  string
	selector                     *metav1.LabelSelector
	matchLabelKeys               string
	affinityPolicy, taintsPolicy corev1.NodeInclusionPolicy
}

// nodeFilterOf is pod's topology node filter (see topologyNodeFilter),
// built once per pod.
func (cs *counters) nodeFilterOf(pod *corev1.Pod) []scheduling.Requirements {
	if filter, ok := cs.filters[pod]; ok {
		return filter
	}
	filter := topologyNodeFilter(pod)
	if cs.filters == nil {
		cs.filters = map[*corev1.Pod][]scheduling.Requirements{}
	}
	cs.filters[pod] = filter
	return filter
}
