package scheduler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// group is a set of pending pods the scheduler cannot tell apart: same
// namespace, labels, requests and scheduling constraints. Everything that
// depends only on those is computed once per group.
type group struct {
	id     int
	pod    *corev1.Pod // the first; stands for all
	ns     string
	labels labels.Set
	req    resVec
	ports  []hostPort
	// volumeReqs come from the pods' PVCs; volumeErr is set when a PVC
	// cannot be resolved.
	volumeReqs scheduling.Requirements
	volumeErr  string
	// matched are the counters whose selector matches the group's pods;
	// owned the anti-affinity owner counters of its required terms;
	// blockers the owner counters whose selector matches it.
	matched, owned, blockers []*counter
	variants                 []*variant
	// nodeFilter: which existing nodes spread constraints with
	// nodeAffinityPolicy Honor count (nodeSelector plus one required
	// term); computed on first use.
	nodeFilter []scheduling.Requirements
	done       bool // no more relaxations
}

// relaxation says how many soft constraints are dropped, in Karpenter's
// order: required node affinity terms (OR) tried one by one, then
// preferred pod affinity, preferred pod anti-affinity, preferred node
// affinity (heaviest first), ScheduleAnyway spread, and last a toleration
// of PreferNoSchedule taints.
type relaxation struct {
	term, podAffinity, podAntiAffinity, nodePreference, scheduleAnyway int
	tolerateSoft                                                       bool
}

// variant is a group at one relaxation level.
type variant struct {
	g           *group
	relax       relaxation
	reqs        scheduling.Requirements
	reqsKey     string
	tolerations []corev1.Toleration
	constraints []*constraint
	// per pool: variant and whether the pool's taints are tolerated.
	pools     []*poolVariant
	tolerates []int8 // 0 unknown, 1 yes, -1 no
	err       string
}

type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

func (a hostPort) conflicts(b hostPort) bool {
	return a.port == b.port && a.protocol == b.protocol && (a.ip == b.ip || a.ip == "" || b.ip == "" || a.ip == "0.0.0.0" || b.ip == "0.0.0.0")
}

func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort > 0 {
					proto := p.Protocol
					if proto == "" {
						proto = corev1.ProtocolTCP
					}
					out = append(out, hostPort{protocol: proto, ip: p.HostIP, port: p.HostPort})
				}
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

// isNil: part is a nil pointer or slice, which json.Marshal writes as null.
func isNil(part any) bool {
	switch p := part.(type) {
	case *corev1.Affinity:
		return p == nil
	case []corev1.Toleration:
		return p == nil
	case []corev1.TopologySpreadConstraint:
		return p == nil
	}
	return false
}

// groupKey is the identity of a pod for scheduling: everything the solver
// reads from a pending pod.
func groupKey(pod *corev1.Pod, req resVec) string {
	var b strings.Builder
	b.WriteString(pod.Namespace)
	b.WriteByte('|')
	keys := make([]string, 0, len(pod.Labels))
	for k := range pod.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(pod.Labels[k])
		b.WriteByte(',')
	}
	b.WriteByte('|')
	for _, v := range req {
		b.WriteString(strconv.FormatInt(v, 36))
		b.WriteByte(',')
	}
	b.WriteByte('|')
	if len(pod.Spec.NodeSelector) > 0 {
		fmt.Fprint(&b, pod.Spec.NodeSelector)
	}
	spec := pod.Spec
	for _, part := range []any{spec.Affinity, spec.Tolerations, spec.TopologySpreadConstraints} {
		b.WriteByte('|')
		if isNil(part) {
			continue // what json.Marshal writes as null, without marshalling
		}
		if raw, err := json.Marshal(part); err == nil && string(raw) != "null" {
			b.Write(raw)
		}
	}
	b.WriteByte('|')
	for _, p := range podHostPorts(pod) {
		fmt.Fprintf(&b, "%s/%s:%d,", p.protocol, p.ip, p.port)
	}
	b.WriteByte('|')
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			b.WriteString(v.PersistentVolumeClaim.ClaimName)
			b.WriteByte(',')
		} else if v.Ephemeral != nil {
			b.WriteString("~" + pod.Name + "-" + v.Name) // a per-pod PVC
			b.WriteByte(',')
		}
	}
	return b.String()
}

func preferredNodeTerms(pod *corev1.Pod) []corev1.PreferredSchedulingTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	terms := slices.Clone(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	slices.SortStableFunc(terms, func(x, y corev1.PreferredSchedulingTerm) int { return -cmp.Compare(x.Weight, y.Weight) })
	return terms
}

func preferredPodTerms(terms []corev1.WeightedPodAffinityTerm) []corev1.PodAffinityTerm {
	sorted := slices.Clone(terms)
	slices.SortStableFunc(sorted, func(x, y corev1.WeightedPodAffinityTerm) int { return -cmp.Compare(x.Weight, y.Weight) })
	out := make([]corev1.PodAffinityTerm, len(sorted))
	for i, t := range sorted {
		out[i] = t.PodAffinityTerm
	}
	return out
}

func podAffinity(pod *corev1.Pod) (required []corev1.PodAffinityTerm, preferred []corev1.PodAffinityTerm) {
	if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil {
		return a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, preferredPodTerms(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return nil, nil
}

func podAntiAffinity(pod *corev1.Pod) (required []corev1.PodAffinityTerm, preferred []corev1.PodAffinityTerm) {
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		return a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, preferredPodTerms(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return nil, nil
}

func requiredNodeTermCount(pod *corev1.Pod) int {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	return 0
}

func scheduleAnyway(pod *corev1.Pod) int {
	n := 0
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			n++
		}
	}
	return n
}

// next is the relaxation after r, or false when nothing is left to relax.
func (s *solver) next(g *group, r relaxation) (relaxation, bool) {
	pod := g.pod
	_, prefAffinity := podAffinity(pod)
	_, prefAnti := podAntiAffinity(pod)
	switch {
	case r.term < requiredNodeTermCount(pod)-1:
		r.term++
	case r.podAffinity < len(prefAffinity):
		r.podAffinity++
	case r.podAntiAffinity < len(prefAnti):
		r.podAntiAffinity++
	case r.nodePreference < len(preferredNodeTerms(pod)):
		r.nodePreference++
	case r.scheduleAnyway < scheduleAnyway(pod):
		r.scheduleAnyway++
	case s.preferNoSchedule && !r.tolerateSoft:
		r.tolerateSoft = true
	default:
		return r, false
	}
	return r, true
}

// variantAt returns the group's variant at relaxation level i, or nil when
// there are not that many levels.
func (s *solver) variantAt(g *group, i int) *variant {
	for len(g.variants) <= i {
		if g.done {
			return nil
		}
		var r relaxation
		if n := len(g.variants); n > 0 {
			var ok bool
			if r, ok = s.next(g, g.variants[n-1].relax); !ok {
				g.done = true
				return nil
			}
		}
		g.variants = append(g.variants, s.newVariant(g, r))
	}
	return g.variants[i]
}

func (s *solver) newVariant(g *group, r relaxation) *variant {
	pod := g.pod
	v := &variant{g: g, relax: r, pools: make([]*poolVariant, len(s.pools)), tolerates: make([]int8, len(s.pools))}
	v.reqs = variantRequirements(g, r)
	v.reqsKey = requirementsKey(v.reqs)
	v.tolerations = pod.Spec.Tolerations
	if r.tolerateSoft {
		v.tolerations = append(slices.Clone(v.tolerations), corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})
	}

	s.addSpreadConstraints(v)
	reqAff, prefAff := podAffinity(pod)
	reqAnti, prefAnti := podAntiAffinity(pod)
	s.addTermConstraints(v, affinity, reqAff, "required pod affinity")
	s.addTermConstraints(v, affinity, prefAff[min(r.podAffinity, len(prefAff)):], "preferred pod affinity")
	s.addTermConstraints(v, antiAffinity, reqAnti, "required pod anti-affinity")
	s.addTermConstraints(v, antiAffinity, prefAnti[min(r.podAntiAffinity, len(prefAnti)):], "preferred pod anti-affinity")
	for _, c := range g.blockers {
		v.constraints = append(v.constraints, &constraint{kind: blocked, c: c,
			desc: fmt.Sprintf("the required pod anti-affinity of pods already placed (on %s, against pods matching %q)", c.key, c.selector.String())})
	}
	return v
}

// variantRequirements is what the group's pods require of a node under
// relaxation r: the nodeSelector, the required node affinity term r is
// at, the heaviest preferred term not yet relaxed, and the volumes'
// requirements.
func variantRequirements(g *group, r relaxation) scheduling.Requirements {
	pod := g.pod
	reqs := scheduling.NewLabelRequirements(pod.Spec.NodeSelector)
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; r.term < len(terms) {
			reqs.Add(scheduling.NewNodeSelectorRequirements(terms[r.term].MatchExpressions...).Values()...)
		}
	}
	// Like Karpenter, the heaviest remaining preferred term is required
	// until relaxed.
	if prefs := preferredNodeTerms(pod); r.nodePreference < len(prefs) {
		reqs.Add(scheduling.NewNodeSelectorRequirements(prefs[r.nodePreference].Preference.MatchExpressions...).Values()...)
	}
	if g.volumeReqs != nil {
		reqs.Add(g.volumeReqs.Values()...)
	}
	return reqs
}

// addSpreadConstraints adds the pod's topology spread constraints, less
// the first ScheduleAnyway ones the variant's relaxation dropped.
func (s *solver) addSpreadConstraints(v *variant) {
	g := v.g
	anyway := 0
	for _, tsc := range g.pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			anyway++
			if anyway <= v.relax.scheduleAnyway {
				continue
			}
		}
		c, err := s.counters.get(tsc.TopologyKey, tsc.LabelSelector, matchLabelValues(g.pod, tsc.MatchLabelKeys), false, []string{g.ns}, false)
		if err != nil {
			v.err = fmt.Sprintf("invalid topologySpreadConstraints labelSelector: %v", err)
			continue
		}
		v.constraints = append(v.constraints, spreadConstraint(g, tsc, c))
	}
}

// matchLabelValues is the pod's value of each of keys it has (nil when
// none), added to a spread constraint's selector.
func matchLabelValues(pod *corev1.Pod, keys []string) map[string]string {
	var extra map[string]string
	for _, k := range keys {
		if val, ok := pod.Labels[k]; ok {
			if extra == nil {
				extra = map[string]string{}
			}
			extra[k] = val
		}
	}
	return extra
}

// spreadConstraint is the rule a topology spread constraint counted by c
// puts on g's pods.
func spreadConstraint(g *group, tsc corev1.TopologySpreadConstraint, c *counter) *constraint {
	// Defaults as in Kubernetes and Karpenter: taints Ignore, affinity Honor.
	k := &constraint{kind: spread, c: c, maxSkew: max(tsc.MaxSkew, 1),
		honorTaints:    tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
		ignoreAffinity: tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore}
	if tsc.MinDomains != nil {
		k.minDomains = *tsc.MinDomains
	}
	if c.matches(g.ns, g.labels) {
		k.self = 1
	}
	k.desc = fmt.Sprintf("topology spread on %s (maxSkew %d) over %s", tsc.TopologyKey, k.maxSkew, c.selector.String())
	return k
}

// addTermConstraints adds a rule of the given kind for each pod
// (anti-)affinity term; what names the terms in messages.
func (s *solver) addTermConstraints(v *variant, kind constraintKind, terms []corev1.PodAffinityTerm, what string) {
	g := v.g
	for _, t := range terms {
		c, err := s.counters.forTerm(t, g.ns, false)
		if err != nil {
			v.err = fmt.Sprintf("invalid %s labelSelector: %v", what, err)
			continue
		}
		k := &constraint{kind: kind, c: c, desc: fmt.Sprintf("%s on %s to pods matching %q", what, t.TopologyKey, c.selector.String())}
		if c.matches(g.ns, g.labels) {
			k.self = 1
		}
		v.constraints = append(v.constraints, k)
	}
}

func requirementsKey(r scheduling.Requirements) string {
	keys := r.Keys().UnsortedList()
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(r.Get(k).String())
		b.WriteByte(';')
	}
	return b.String()
}

// poolVariant is the variant's view of pool i.
func (s *solver) variantPool(v *variant, i int) *poolVariant {
	if vp := v.pools[i]; vp != nil {
		return vp
	}
	vp := s.poolVariant(s.pools[i], v.reqs, v.reqsKey)
	v.pools[i] = vp
	return vp
}

func (v *variant) toleratesPool(pl *pool, i int) bool {
	if v.tolerates[i] == 0 {
		v.tolerates[i] = -1
		if pl.taints.Tolerates(v.tolerations) == nil {
			v.tolerates[i] = 1
		}
	}
	return v.tolerates[i] == 1
}
