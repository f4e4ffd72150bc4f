package snapshot

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
)

// encodeAs encodes obj as the API server sends it in the media type.
func encodeAs(t *testing.T, mediaType string, obj runtime.Object) []byte {
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
// compares with what the client's decoder makes of the same bytes; a body
// it cannot take is an error saying why.
func TestDecodePage(t *testing.T) {
	pods := podPage()
	podBody := encodeAs(t, runtime.ContentTypeProtobuf, pods)
	nodeBody := encodeAs(t, runtime.ContentTypeProtobuf, &corev1.NodeList{Items: []corev1.Node{*testfixtures.Node(testfixtures.NodeOptions{Name: "n", CPU: "16", Memory: "64Gi"})}})
	podKind := &protoKind{resource: "pods", listKind: "PodList", newItem: func() protoObject { return &corev1.Pod{} }}
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
			if read.count != 3 || read.cont != "next-token" || read.rvOfPage != "4242" {
				t.Errorf("page = %+v, want 3 objects, continue next-token, resourceVersion 4242", read)
			}
			want := &corev1.PodList{}
			if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(tc.body, nil, want); err != nil {
				t.Fatal(err)
			}
			for i := range want.Items {
				if i >= len(got) || !equality.Semantic.DeepEqual(&want.Items[i], got[i]) {
					t.Fatalf("item %d differs from the client's decoding", i)
				}
			}
		})
	}
}

// TestDecodePageCopies: the decoded objects hold no part of the body, so
// PageReader may reuse its buffer for the next page.
func TestDecodePageCopies(t *testing.T) {
	body := encodeAs(t, runtime.ContentTypeProtobuf, podPage())
	podKind := &protoKind{resource: "pods", listKind: "PodList", newItem: func() protoObject { return &corev1.Pod{} }}
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
