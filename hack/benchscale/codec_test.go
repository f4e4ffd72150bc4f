package main

import (
	goruntime "runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// podList is a page of the bench cluster's bound pods.
func podList(n int) *corev1.PodList {
	s := shape{nodes: 5000, pods: n, namespaces: 50}
	l := &corev1.PodList{}
	for i := range n {
		p, st := boundPod(i, s, false)
		p.Status = st
		p.ResourceVersion = "12345"
		l.Items = append(l.Items, *p)
	}
	return l
}

// BenchmarkDecodePods decodes a 500-pod LIST page as the API server sends
// it in each content type: what the cache pays per page on a cold start.
func BenchmarkDecodePods(b *testing.B) {
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	gv := corev1.SchemeGroupVersion
	for _, mediaType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
		enc := codecs.EncoderForVersion(info.Serializer, gv)
		data, err := runtime.Encode(enc, podList(500))
		if err != nil {
			b.Fatal(err)
		}
		dec := codecs.UniversalDeserializer()
		b.Run(mediaType, func(b *testing.B) {
			b.ReportMetric(float64(len(data))/500, "bytes/pod-on-wire")
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := dec.Decode(data, nil, &corev1.PodList{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStrippedPodHeap measures the heap one bench pod takes as decoded and
// once compacted, and fails when the compacted pod does not fit in what
// the memory budget counts for a pod (snapshot.BytesPerObject), or when
// compacting no longer saves at least half of a pod's heap.
func TestStrippedPodHeap(t *testing.T) {
	const n = 5000
	perPod := map[bool]int64{}
	for _, strip := range []bool{false, true} {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		l := podList(n)
		if strip {
			for i := range l.Items {
				snapshot.Compact(&l.Items[i])
			}
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		perPod[strip] = (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
		t.Logf("strip=%v: %d bytes of heap per pod", strip, perPod[strip])
		goruntime.KeepAlive(l)
	}
	if budget := snapshot.BytesPerObject("pods"); perPod[true] > budget {
		t.Errorf("a compacted pod takes %d bytes of heap; the memory budget counts %d: raise the pods' bytesPerObject in pkg/snapshot/kinds.go",
			perPod[true], budget)
	}
	if perPod[true] <= 0 || perPod[true]*2 > perPod[false] {
		t.Errorf("a compacted pod takes %d bytes of heap, a decoded one %d; compacting should save at least half", perPod[true], perPod[false])
	}
}
