package scheduler

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// countersByNamespace indexes the counters that count pods (not owner
// counters) by the namespaces they count in, so that counting a bound pod
// evaluates only the selectors of counters in its namespace: in a cluster
// of many namespaces most counters are ruled out by one map lookup instead
// of one namespace test each.
//
// Invariant: the list of a namespace is every counter of counters.all, in
// that order, that is not an owner counter and counts in that namespace,
// as of the moment the namespace is first looked up; no counter may be
// added afterwards while the index is in use.
type countersByNamespace struct {
	counters    *counters
	byNamespace map[string][]*counter
	// last is the namespace last looked up and lastList its list: pods
	// come in the API server's order, namespace by namespace, so most
	// lookups need no map.
	last     string
	lastList []*counter
	lastSet  bool
}

func newCountersByNamespace(cs *counters) *countersByNamespace {
	return &countersByNamespace{counters: cs, byNamespace: map[string][]*counter{}}
}

// inNamespace lists the counters that count pods in namespace.
func (idx *countersByNamespace) inNamespace(namespace string) []*counter {
	if idx.lastSet && namespace == idx.last {
		return idx.lastList
	}
	list := idx.lookup(namespace)
	idx.last, idx.lastList, idx.lastSet = namespace, list, true
	return list
}

func (idx *countersByNamespace) lookup(namespace string) []*counter {
	list, ok := idx.byNamespace[namespace]
	if ok {
		return list
	}
	for _, counter := range idx.counters.all {
		if !counter.owners && (counter.allNS || slices.Contains(counter.ns, namespace)) {
			list = append(list, counter)
		}
	}
	idx.byNamespace[namespace] = list
	return list
}

// matched lists the counters pod counts in: c.matches(pod's namespace,
// pod's labels) for every counter c that is not an owner counter.
func (idx *countersByNamespace) matched(pod *corev1.Pod, out []*counter) []*counter {
	podLabels := labels.Set(pod.Labels)
	for _, counter := range idx.inNamespace(pod.Namespace) {
		if counter.selector.Matches(podLabels) {
			out = append(out, counter)
		}
	}
	return out
}
