package snapshot

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

// encodeAs encodes obj as the API server sends it in the media type.
func encodeAs(t testing.TB, mediaType string, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func podPage() *corev1.PodList {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "4242", Continue: "next-token"}}
	for _, pod := range []*corev1.Pod{
		testfixtures.Pod(testfixtures.PodOptions{Name: "a", CPU: "1", Memory: "1Gi", NodeName: "n", Phase: corev1.PodRunning}),
		testfixtures.Pod(testfixtures.PodOptions{Name: "b", Namespace: "team", CPU: "500m", Labels: map[string]string{"app": "b"}}),
		testfixtures.Pod(testfixtures.PodOptions{Name: "c", Memory: "4Gi", Conditions: []corev1.PodCondition{testfixtures.Unschedulable()}}),
	} {
		pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}}
		list.Items = append(list.Items, *pod)
	}
	return list
}

// TestDecodePage decodes protobuf LIST bodies as PageReader does and
// compares, compacted, with what the client's decoder makes of the same
// bytes, compacted; a body it cannot take is an error saying why.
func TestDecodePage(t *testing.T) {
	pods := podPage()
	podBody := encodeAs(t, runtime.ContentTypeProtobuf, pods)
	nodeBody := encodeAs(t, runtime.ContentTypeProtobuf, &corev1.NodeList{Items: []corev1.Node{*testfixtures.Node(testfixtures.NodeOptions{Name: "n", CPU: "16", Memory: "64Gi"})}})
	podKind := podsProto
	for _, tc := range []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{name: "a page of pods", body: podBody},
		{name: "JSON", body: encodeAs(t, runtime.ContentTypeJSON, pods), wantErr: "not the API server's protobuf"},
		{name: "another kind", body: nodeBody, wantErr: `holds a "NodeList", not a PodList`},
		{name: "cut short", body: podBody[:len(podBody)-7], wantErr: "malformed protobuf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []client.Object
			read, err := decodePage(bytes.Clone(tc.body), podKind, func(obj client.Object) { got = append(got, obj) })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "pods") {
					t.Fatalf("error %v, want one naming pods and saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if read.count != 3 || !read.more || read.rv != "4242" {
				t.Errorf("page = %+v, want 3 objects, more to come (a continue token), resourceVersion 4242", read)
			}
			want := &corev1.PodList{}
			if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(tc.body, nil, want); err != nil {
				t.Fatal(err)
			}
			var wantCompactor, gotCompactor Compactor
			for i := range want.Items {
				if len(want.Items[i].ManagedFields) == 0 {
					t.Fatalf("the page's item %d has no managedFields: the test shows nothing", i)
				}
				if i >= len(got) || len(got[i].GetManagedFields()) > 0 {
					t.Fatalf("item %d missing or decoded with its managedFields", i)
				}
				wantCompactor.Compact(&want.Items[i])
				gotCompactor.Compact(got[i])
				if !equality.Semantic.DeepEqual(&want.Items[i], got[i]) {
					t.Fatalf("item %d, compacted, differs from the client's decoding compacted:\n got %+v\nwant %+v", i, got[i], &want.Items[i])
				}
			}
		})
	}
}

// TestDecodePageCopies: the decoded objects hold no part of the body, so
// PageReader may reuse its buffer for the next page.
func TestDecodePageCopies(t *testing.T) {
	body := encodeAs(t, runtime.ContentTypeProtobuf, podPage())
	podKind := podsProto
	var got []client.Object
	if _, err := decodePage(body, podKind, func(obj client.Object) { got = append(got, obj) }); err != nil {
		t.Fatal(err)
	}
	before := got[0].(*corev1.Pod).DeepCopy()
	for i := range body {
		body[i] = 'x'
	}
	if !equality.Semantic.DeepEqual(before, got[0]) {
		t.Error("overwriting the body changed a decoded pod")
	}
}

// benchPage is a 500-pod page whose pods carry two managedFields entries
// of about the size the API server keeps for a ReplicaSet's running pod
// (hack/benchscale's podManagedFields: about 1.7 KB of a 3 KB pod).
func benchPage(b *testing.B) []byte {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	spec := []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{"f:app":{},"f:pod-template-hash":{},"f:team":{}},"f:ownerReferences":{"k:{\"uid\":\"6f1c8d5e-3f0a-4c57-9a43-2d1f6b7e8a90\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{"f:env":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{},"f:tolerations":{},"f:topologySpreadConstraints":{},"f:affinity":{}}}`)
	status := []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{},"f:startTime":{}}}`)
	now := metav1.Now()
	for i := range 500 {
		pod := testfixtures.Pod(testfixtures.PodOptions{Name: "pod-" + strconv.Itoa(i), Namespace: "team-01", CPU: "250m", Memory: "512Mi",
			NodeName: "node-1", Phase: corev1.PodRunning, Labels: map[string]string{"app": "web", "team": "a", "pod-template-hash": "5d8f7c"}})
		pod.ManagedFields = []metav1.ManagedFieldsEntry{
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: spec}},
			{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: status}, Subresource: "status"},
		}
		list.Items = append(list.Items, *pod)
	}
	return encodeAs(b, runtime.ContentTypeProtobuf, list)
}

// apiShapedPage is a 500-pod page of scaletest's bound pods, shaped as the
// API server returns them: managedFields, env, a readiness probe, a
// projected volume, a security context, five conditions and a container
// status with its state.
func apiShapedPage(b *testing.B) []byte {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for _, pod := range scaletest.Generate(scaletest.Size{Nodes: 20, BoundPods: 500, Seed: 3}).BoundPods {
		list.Items = append(list.Items, *pod)
	}
	return encodeAs(b, runtime.ContentTypeProtobuf, list)
}

// BenchmarkDecodePage decodes and compacts a 500-pod protobuf page as the
// client's List does (its decoder, every item compacted) and as PageReader
// does (decodePage), on small pods (testfixtures') and on API-server-shaped
// ones (api-shaped/).
func BenchmarkDecodePage(b *testing.B) {
	benchDecodePage(b, benchPage(b))
	b.Run("api-shaped", func(b *testing.B) { benchDecodePage(b, apiShapedPage(b)) })
}

func benchDecodePage(b *testing.B, data []byte) {
	podKind := podsProto
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list := &corev1.PodList{}
			if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, list); err != nil {
				b.Fatal(err)
			}
			for i := range list.Items {
				Compact(&list.Items[i])
			}
		}
	})
	b.Run("PageReader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodePage(data, podKind, Compact); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPageReaderCompression: PageReader asks the API server for gzip
// unless its config disables compression, and reads the page either way.
func TestPageReaderCompression(t *testing.T) {
	body := encodeAs(t, runtime.ContentTypeProtobuf, podPage())
	for _, tc := range []struct {
		name         string
		disable      bool
		wantEncoding string
	}{
		{name: "compression disabled", disable: true, wantEncoding: ""},
		{name: "compression allowed", disable: false, wantEncoding: "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				askedMu sync.Mutex // the page after the first is asked for ahead, concurrently
				asked   []string
			)
			// TLS, as every API server: over plain HTTP client-go uses
			// http.DefaultTransport, which ignores DisableCompression
			// (k8s.io/client-go transport/cache.go).
			server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				askedMu.Lock()
				asked = append(asked, r.Header.Get("Accept-Encoding"))
				askedMu.Unlock()
				w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
				_, _ = w.Write(body)
			}))
			defer server.Close()
			reader, err := NewPageReader(&rest.Config{Host: server.URL, DisableCompression: tc.disable,
				TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
			if err != nil {
				t.Fatal(err)
			}
			reader.ListsAtOnce = 1 // one LIST of every pod
			var read page
			for got, err := range reader.pages(t.Context(), podsProto, 500, func(client.Object) {}) {
				if err != nil {
					t.Fatal(err)
				}
				read = got
				break // the page says there is more; the first one is the test
			}
			if read.count != 3 {
				t.Fatalf("read %+v; want 3 pods", read)
			}
			askedMu.Lock()
			defer askedMu.Unlock()
			if len(asked) == 0 || asked[0] != tc.wantEncoding {
				t.Errorf("Accept-Encoding %q, want %q", asked, tc.wantEncoding)
			}
		})
	}
}

// TestPageReaderStreams reads a list of API-server-shaped pods larger than
// several chunks, as the API server streams it, and checks every pod comes
// out once, in order, with a page every `every` objects and the list's
// resourceVersion on the last; a reader stopped early, or a body cut off
// mid-item, ends with no page claiming the list was whole.
func TestPageReaderStreams(t *testing.T) {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "777"}}
	for _, pod := range scaletest.Generate(scaletest.Size{Nodes: 60, BoundPods: 6000, Seed: 5}).BoundPods {
		list.Items = append(list.Items, *pod)
	}
	body := encodeAs(t, runtime.ContentTypeProtobuf, list)
	if len(body) < 2*chunkBytes {
		t.Fatalf("the body is %d bytes; the test needs more than two chunks (%d)", len(body), 2*chunkBytes)
	}
	serve := func(t *testing.T, data []byte) *PageReader {
		reader := readerOf(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("limit") || r.URL.Query().Has("continue") {
				t.Errorf("the reader asked for a page (%s); want one LIST", r.URL.RawQuery)
			}
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			_, _ = w.Write(data)
		}))
		reader.ListsAtOnce = 1 // one LIST of every pod
		return reader
	}

	t.Run("whole", func(t *testing.T) {
		var names []string
		var pages []page
		for read, err := range serve(t, body).pages(t.Context(), podsProto, 1000, func(obj client.Object) { names = append(names, obj.GetName()) }) {
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, read)
		}
		if len(names) != len(list.Items) {
			t.Fatalf("read %d pods; want %d", len(names), len(list.Items))
		}
		for i := range names {
			if names[i] != list.Items[i].Name {
				t.Fatalf("pod %d is %s; want %s (in the list's order)", i, names[i], list.Items[i].Name)
			}
		}
		var total int64
		for i, read := range pages {
			total += read.count
			last := i == len(pages)-1
			if read.more == last || (!last && read.count < 1000) {
				t.Errorf("page %d = %+v; want at least 1000 objects and more to come but on the last", i, read)
			}
		}
		if last := pages[len(pages)-1]; last.rv != "777" || total != int64(len(list.Items)) {
			t.Errorf("pages %+v count %d objects, the last at resourceVersion %q; want %d and 777", pages, total, last.rv, len(list.Items))
		}
	})
	t.Run("stopped early", func(t *testing.T) {
		for read, err := range serve(t, body).pages(t.Context(), podsProto, 500, func(client.Object) {}) {
			if err != nil || !read.more {
				t.Fatalf("first page %+v, %v; want one with more to come", read, err)
			}
			break
		}
	})
	t.Run("cut off", func(t *testing.T) {
		var sawErr error
		for read, err := range serve(t, body[:len(body)-100]).pages(t.Context(), podsProto, 1000, func(client.Object) {}) {
			if err != nil {
				sawErr = err
				break
			}
			if !read.more {
				t.Fatalf("a body cut short ended with a last page %+v", read)
			}
		}
		if sawErr == nil || !strings.Contains(sawErr.Error(), "listing pods") || !strings.Contains(sawErr.Error(), "unexpected EOF") {
			t.Errorf("error %v; want one naming the pods list and the body ending early", sawErr)
		}
	})
}
