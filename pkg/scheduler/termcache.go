package scheduler

import (
	"encoding/binary"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ownerCounters finds the owner counter of a bound pod's required
// anti-affinity term without rebuilding the term's selector and identity
// string (counters.forTerm) for every pod: the pods of one Deployment carry
// equal terms, so a cluster of 150,000 pods holds a few hundred distinct
// ones. Terms are keyed by an injective encoding of everything forTerm
// reads (the term's namespace, topologyKey, namespaces, namespaceSelector
// and labelSelector), so equal keys get the counter forTerm would return.
// Failed terms are not remembered: forTerm is asked again.
type ownerCounters struct {
	counters *counters
	byKey    map[string]*counter
	key      []byte
	sorted   []string
}

func newOwnerCounters(cs *counters) *ownerCounters {
	return &ownerCounters{counters: cs, byKey: map[string]*counter{}}
}

// appendOwned appends to out the counters pod's required anti-affinity
// terms own.
func (oc *ownerCounters) appendOwned(pod *corev1.Pod, out []*counter) []*counter {
	reqAnti, _ := podAntiAffinity(pod)
	for i := range reqAnti {
		if owned, err := oc.forTerm(&reqAnti[i], pod.Namespace); err == nil {
			out = append(out, owned)
		}
	}
	return out
}

// forTerm is counters.forTerm(term, ns, true).
func (oc *ownerCounters) forTerm(term *corev1.PodAffinityTerm, ns string) (*counter, error) {
	oc.key = oc.appendTermKey(oc.key[:0], term, ns)
	if owned, ok := oc.byKey[string(oc.key)]; ok {
		return owned, nil
	}
	owned, err := oc.counters.forTerm(*term, ns, true)
	if err != nil {
		return nil, err
	}
	oc.byKey[string(oc.key)] = owned
	return owned, nil
}

func (oc *ownerCounters) appendTermKey(key []byte, term *corev1.PodAffinityTerm, ns string) []byte {
	key = appendKeyString(key, ns)
	key = appendKeyString(key, term.TopologyKey)
	key = appendKeyStrings(key, term.Namespaces)
	key = oc.appendSelectorKey(key, term.NamespaceSelector)
	return oc.appendSelectorKey(key, term.LabelSelector)
}

// appendSelectorKey encodes a selector: absent (nil) differs from empty,
// matchLabels go in key order.
func (oc *ownerCounters) appendSelectorKey(key []byte, selector *metav1.LabelSelector) []byte {
	if selector == nil {
		return append(key, 0)
	}
	key = append(key, 1)
	oc.sorted = oc.sorted[:0]
	for label := range selector.MatchLabels {
		oc.sorted = append(oc.sorted, label)
	}
	slices.Sort(oc.sorted)
	key = binary.AppendUvarint(key, uint64(len(oc.sorted)))
	for _, label := range oc.sorted {
		key = appendKeyString(key, label)
		key = appendKeyString(key, selector.MatchLabels[label])
	}
	key = binary.AppendUvarint(key, uint64(len(selector.MatchExpressions)))
	for _, expr := range selector.MatchExpressions {
		key = appendKeyString(key, expr.Key)
		key = appendKeyString(key, string(expr.Operator))
		key = appendKeyStrings(key, expr.Values)
	}
	return key
}

// appendKeyString writes s with its length first, so that no two
// sequences of strings encode alike.
func appendKeyString(key []byte, s string) []byte {
	key = binary.AppendUvarint(key, uint64(len(s)))
	return append(key, s...)
}

func appendKeyStrings(key []byte, list []string) []byte {
	key = binary.AppendUvarint(key, uint64(len(list)))
	for _, s := range list {
		key = appendKeyString(key, s)
	}
	return key
}
