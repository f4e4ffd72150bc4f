package scheduler

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// Label presence.
//
// A node selector entry, or a node affinity expression with In, Exists,
// Gt or Lt, is met only by a node that has the label. Karpenter's
// Requirements keep one set of allowed values per key, and that set
// cannot tell "a value other than b" from "any value or none": Exists
// and NotIn [b] together read as NotIn [b], and In [web] with In [batch]
// as DoesNotExist; both pass Compatible for a key a NodePool does not
// define, though the node it would launch carries no such label and the
// pod would stay pending there. The solver therefore notes, per variant,
// the keys its pods need present (mustExist) and the keys whose terms
// admit no value at all (a conflict), and checks them itself.

// presenceOperators are the node selector operators a node without the
// label never meets.
var presenceOperators = []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt}

// labelPresence returns, for a group's pods at relaxation r with combined
// requirements reqs, the keys a node must carry whose combined
// requirement alone would admit a node without them (mustExist, sorted),
// and why the terms can be met by no node at all, if a key they need
// present is left with no value ("" when none is).
func labelPresence(g *group, r relaxation, reqs scheduling.Requirements) (mustExist []string, conflict string) {
	var present []string
	for key := range g.pod.Spec.NodeSelector {
		present = append(present, key)
	}
	addTerm := func(exprs []corev1.NodeSelectorRequirement) {
		for _, expr := range exprs {
			if slices.Contains(presenceOperators, expr.Operator) {
				present = append(present, expr.Key)
			}
		}
	}
	if affinity := g.pod.Spec.Affinity; affinity != nil && affinity.NodeAffinity != nil && affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if terms := affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; r.term < len(terms) {
			addTerm(terms[r.term].MatchExpressions)
		}
	}
	if prefs := preferredNodeTerms(g.pod); r.nodePreference < len(prefs) {
		addTerm(prefs[r.nodePreference].Preference.MatchExpressions)
	}
	for key := range g.volumeReqs {
		present = append(present, key)
	}
	slices.Sort(present)
	for _, key := range slices.Compact(present) {
		switch reqs.Get(key).Operator() {
		case corev1.NodeSelectorOpDoesNotExist:
			if conflict == "" {
				conflict = fmt.Sprintf("the pod's node selector and node affinity need label %q on the node but together admit none of its values", key)
			}
		case corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists:
			mustExist = append(mustExist, key)
		}
	}
	return mustExist, conflict
}

// presenceKey is what mustExist adds to a variant's requirements key:
// the same requirements with different keys to keep present are
// different pool variants and different compatibility with a node.
func presenceKey(mustExist []string) string {
	if len(mustExist) == 0 {
		return ""
	}
	return "|present:" + strings.Join(mustExist, ",")
}

// missingLabel returns the first key of mustExist whose requirement in
// reqs (a pool's narrowed requirements, or a node's) gives the node no
// label value: the key's set is not a list of values. Instance-type keys,
// zone, capacity type and the other well-known labels are left out:
// every node carries them, with a value the instance type or offering
// sets. ok is false when a key is missing.
func (s *solver) missingLabel(mustExist []string, reqs scheduling.Requirements) (key string, ok bool) {
	for _, key := range mustExist {
		if s.typeKeys[key] || karpv1.WellKnownLabels.Has(key) {
			continue
		}
		if !reqs.Has(key) || reqs.Get(key).Operator() != corev1.NodeSelectorOpIn {
			return key, false
		}
	}
	return "", true
}
