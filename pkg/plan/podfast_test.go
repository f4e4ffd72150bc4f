package plan

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// slowPod is the obviously correct reading of a pod's JSON: encoding/json
// into a corev1.Pod, then Compact.
func slowPod(t *testing.T, js []byte) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := json.Unmarshal(js, pod); err != nil {
		t.Fatalf("slow path: %v\n%s", err, js)
	}
	var compactor snapshot.Compactor
	compactor.Compact(pod)
	return pod
}

// TestFastPodMatchesSlow: every API-server-shaped pod of the fixture,
// pruned, is decoded by podDecoder, and equals the slow path's pod; a
// second decode of each (the parts now taken from the table) too.
func TestFastPodMatchesSlow(t *testing.T) {
	var compactor snapshot.Compactor
	dec := podDecoder{compactor: &compactor}
	for round := range 2 {
		for _, obj := range pruneFixture() {
			if _, ok := obj.(*corev1.Pod); !ok {
				continue
			}
			js, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			pruned := prune(nil, js, podRule)
			fast, ok := dec.decode(pruned)
			if !ok {
				t.Fatalf("round %d, %s: the fast path refused an API-server pod:\n%s", round, obj.GetName(), pruned)
			}
			if want := slowPod(t, pruned); !reflect.DeepEqual(fast, want) {
				t.Errorf("round %d, %s: fast and slow pods differ\nfast: %+v\nslow: %+v", round, obj.GetName(), fast, want)
			}
		}
	}
}

// TestFastPodCases: pods the fast path takes equal the slow path's; the
// ones it must refuse (spellings encoding/json folds, parts given twice,
// values that are not plain) are refused.
func TestFastPodCases(t *testing.T) {
	for _, tc := range []struct {
		name, js string
		fast     bool
	}{
		{"plain", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"n","labels":{"x":"y"},"creationTimestamp":"2026-11-01T00:00:00Z"},"spec":{"priority":-3,"enableServiceLinks":false,"preemptionPolicy":"Never","containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]},"status":{"phase":"Pending","startTime":"2026-11-01T00:00:01Z"}}`, true},
		{"null creation time", `{"metadata":{"name":"a","creationTimestamp":null}}`, true},
		{"batched fields", `{"metadata":{"name":"a","generation":3,"deletionTimestamp":"2026-11-01T00:00:00Z"},"spec":{"hostNetwork":true,"overhead":{"cpu":"250m"},"runtimeClassName":"kata"},"status":{"message":"m","resize":"Proposed"}}`, true},
		{"empty labels and tolerations", `{"metadata":{"labels":{}},"spec":{"tolerations":[],"nodeSelector":{}}}`, true},
		{"annotations lose last-applied", `{"metadata":{"annotations":{"` + lastAppliedKey + `":"{}","k":"v"}}}`, true},
		{"conditions kept", `{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","lastTransitionTime":"2026-11-01T00:00:00Z"},{"type":"Ready"}]}}`, true},
		{"resized status", `{"status":{"containerStatuses":[{"name":"c","resources":{"requests":{"cpu":"2"}}}]}}`, true},
		{"folded key", `{"metadata":{"Name":"a"}}`, false},
		{"labels twice", `{"metadata":{"labels":{"a":"b"},"labels":{"c":"d"}}}`, false},
		{"escaped name", `{"metadata":{"name":"a\u0062"}}`, false},
		{"null name", `{"metadata":{"name":null}}`, false},
		{"fraction priority", `{"spec":{"priority":1.0}}`, false},
		{"priority out of range", `{"spec":{"priority":3000000000}}`, false},
		{"null spec", `{"spec":null}`, false},
		{"unknown field", `{"spec":{"nodeName":"n","madeUp":1}}`, false},
		{"bad time", `{"metadata":{"creationTimestamp":"yesterday"}}`, false},
		{"bad batched value", `{"spec":{"hostNetwork":"yes"}}`, false},
		{"bad part", `{"spec":{"containers":{"name":"c"}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var compactor snapshot.Compactor
			dec := podDecoder{compactor: &compactor}
			fast, ok := dec.decode([]byte(tc.js))
			if ok != tc.fast {
				t.Fatalf("fast path took it: %v, want %v", ok, tc.fast)
			}
			if !ok {
				return
			}
			if want := slowPod(t, []byte(tc.js)); !reflect.DeepEqual(fast, want) {
				t.Errorf("fast and slow pods differ\nfast: %+v\nslow: %+v", fast, want)
			}
		})
	}
}

// FuzzFastPod: whenever the fast path takes a pod's JSON, encoding/json
// takes it too, and Compact makes the same pod of it.
func FuzzFastPod(f *testing.F) {
	f.Add([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","labels":{"x":"y"},"creationTimestamp":"2026-11-01T00:00:00Z"},"spec":{"priority":-3,"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]},"status":{"phase":"Pending","conditions":[{"type":"PodScheduled"}]}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"k":"v"},"generation":3},"spec":{"hostNetwork":true,"tolerations":[]},"status":{"startTime":"2026-11-01T00:00:01Z"}}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		var compactor snapshot.Compactor
		dec := podDecoder{compactor: &compactor}
		fast, ok := dec.decode(js)
		if !ok {
			return
		}
		slow := &corev1.Pod{}
		if err := json.Unmarshal(js, slow); err != nil {
			t.Fatalf("the fast path took %q, which encoding/json refuses: %v", js, err)
		}
		var slowCompactor snapshot.Compactor
		slowCompactor.Compact(slow)
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q\nfast: %+v\nslow: %+v", js, fast, slow)
		}
	})
}
