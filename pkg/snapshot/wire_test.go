package snapshot

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

// edgePods are hand-made pods with what compaction must keep exactly
// right: claim volumes among others, an in-place resize reported by one
// container of two, init containers and a sidecar, overhead, resource
// claims, host ports among ports, the conditions a pass reads among
// others, kubectl's last-applied annotation alone and with others.
func edgePods() map[string]*corev1.Pod {
	base := func(name string) *corev1.Pod {
		pod := testfixtures.Pod(testfixtures.PodOptions{Name: name, Namespace: "team", CPU: "1", Memory: "1Gi", NodeName: "n", Phase: corev1.PodRunning})
		pod.GenerateName = "web-"
		pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}}
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
		pod.Spec.Containers[0].Command = []string{"/bin/app"}
		return pod
	}
	always := corev1.ContainerRestartPolicyAlways
	grown := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	pods := map[string]*corev1.Pod{}

	volumes := base("volumes")
	volumes.Spec.Volumes = []corev1.Volume{
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptrTo("managed-csi")}}}}},
		{Name: "empty-claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{}}},
	}
	pods["claim and ephemeral volumes"] = volumes

	resize := base("resize")
	resize.Spec.Containers = append(resize.Spec.Containers, corev1.Container{Name: "second", Image: "x", Resources: corev1.ResourceRequirements{Requests: grown}})
	resize.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "c", Image: "img", Ready: true, Resources: &corev1.ResourceRequirements{Requests: grown}, AllocatedResources: grown},
		{Name: "second", Image: "x", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}
	resize.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: "Infeasible"}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	pods["resize status"] = resize

	allocatedOnly := base("allocated")
	allocatedOnly.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", Image: "i", AllocatedResources: grown}, {Name: "init2", Image: "i"}}
	pods["allocated resources in an init container status"] = allocatedOnly

	sidecar := base("sidecar")
	sidecar.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Image: "setup", Command: []string{"sh"}, Resources: corev1.ResourceRequirements{Requests: grown}},
		{Name: "proxy", Image: "envoy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: grown},
			ResizePolicy:       []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}},
			RestartPolicyRules: []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart}},
			ReadinessProbe:     &corev1.Probe{PeriodSeconds: 3}},
	}
	sidecar.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", Image: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
	sidecar.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	sidecar.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "debug"}}
	pods["init containers and a sidecar"] = sidecar

	overhead := base("overhead")
	overhead.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	overhead.Spec.RuntimeClassName = ptrTo("kata")
	overhead.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("gpu-template")}}
	overhead.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	overhead.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo("overhead-gpu")}}
	overhead.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
	pods["overhead and resource claims"] = overhead

	ports := base("ports")
	ports.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP},
		{Name: "odd", ContainerPort: 1, HostPort: -1}}
	pods["host ports among ports"] = ports

	applied := base("applied")
	applied.Annotations = map[string]string{lastApplied: `{"kind":"Pod"}`}
	pods["only a last-applied annotation"] = applied

	appliedToo := base("applied-too")
	appliedToo.Annotations = map[string]string{lastApplied: `{"kind":"Pod"}`, "karpenter.sh/do-not-disrupt": "true"}
	appliedToo.Finalizers = []string{"example.com/hold"}
	pods["last-applied among annotations"] = appliedToo

	dropped := base("dropped")
	dropped.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(1000))}
	dropped.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "acr"}}
	dropped.Spec.DNSPolicy, dropped.Spec.DNSConfig = corev1.DNSClusterFirst, &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
	dropped.Spec.ServiceAccountName, dropped.Spec.DeprecatedServiceAccount = "sa", "sa"
	dropped.Spec.Hostname, dropped.Spec.Subdomain = "h", "s"
	dropped.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"db"}}}
	dropped.Status.HostIP, dropped.Status.PodIP, dropped.Status.QOSClass = "10.0.0.2", "10.1.0.2", corev1.PodQOSGuaranteed
	dropped.Status.HostIPs, dropped.Status.PodIPs = []corev1.HostIP{{IP: "10.0.0.2"}}, []corev1.PodIP{{IP: "10.1.0.2"}}
	dropped.Spec.PriorityClassName, dropped.Spec.SchedulerName = "high", "default-scheduler"
	dropped.Status.NominatedNodeName, dropped.Status.Message, dropped.Status.Reason = "n2", "m", "r"
	pods["every field compactPodSpec and compactPodStatus clear"] = dropped
	return pods
}

func ptrTo[T any](v T) *T { return &v }

// wireCase is one object, as protobuf, with a new empty one to decode it.
type wireCase struct {
	name   string
	object protoObject
	rule   *messageRule
}

func wireCases(t *testing.T) []wireCase {
	t.Helper()
	generated := scaletest.Generate(scaletest.Size{Nodes: 6, BoundPods: 60, PendingPods: 6, Seed: 11})
	var cases []wireCase
	for _, pod := range append(generated.BoundPods[:4:4], generated.PendingPods[0]) {
		cases = append(cases, wireCase{name: "scaletest pod " + pod.Name, object: pod, rule: podWireRule})
	}
	for name, pod := range edgePods() {
		cases = append(cases, wireCase{name: name, object: pod, rule: podWireRule})
	}
	node := generated.Nodes[0]
	cases = append(cases, wireCase{name: "scaletest node", object: node, rule: nodeWireRule})
	applied := node.DeepCopy()
	applied.Annotations = map[string]string{lastApplied: "{}"}
	return append(cases, wireCase{name: "node with only a last-applied annotation", object: applied, rule: nodeWireRule})
}

func marshal(t *testing.T, obj protoObject) []byte {
	t.Helper()
	data, err := obj.(interface{ Marshal() ([]byte, error) }).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestWireFilterKeepsCompact: for API-server-shaped pods and nodes and
// hand-made edge cases, decoding the wire-filtered protobuf and then
// compacting gives the very object that decoding it whole and compacting
// gives; and the filter drops what it should before decoding.
func TestWireFilterKeepsCompact(t *testing.T) {
	for _, tc := range wireCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			data := marshal(t, tc.object)
			whole := reflect.New(reflect.TypeOf(tc.object).Elem()).Interface().(protoObject)
			if err := whole.Unmarshal(data); err != nil {
				t.Fatal(err)
			}
			filteredBytes, err := filterMessage(tc.rule, data, nil)
			if err != nil {
				t.Fatal(err)
			}
			filtered := reflect.New(reflect.TypeOf(tc.object).Elem()).Interface().(protoObject)
			if err := filtered.Unmarshal(filteredBytes); err != nil {
				t.Fatal(err)
			}
			checkDroppedBeforeDecode(t, filtered)
			var wholeCompactor, filteredCompactor Compactor
			wholeCompactor.Compact(whole)
			filteredCompactor.Compact(filtered)
			if !reflect.DeepEqual(whole, filtered) {
				t.Fatalf("compacted after the wire filter:\n%+v\nwant (compacted whole):\n%+v", filtered, whole)
			}
		})
	}
}

// checkDroppedBeforeDecode: what the filter let through has none of what
// it drops (so the test above is not passing on a filter that keeps all).
func checkDroppedBeforeDecode(t *testing.T, obj client.Object) {
	t.Helper()
	if len(obj.GetManagedFields()) > 0 || obj.GetAnnotations()[lastApplied] != "" {
		t.Error("managedFields or the last-applied annotation went through")
	}
	switch typed := obj.(type) {
	case *corev1.Pod:
		for _, container := range append(typed.Spec.Containers, typed.Spec.InitContainers...) {
			if container.Image != "" || len(container.Env) > 0 || len(container.Command) > 0 || container.ReadinessProbe != nil {
				t.Errorf("container %s: image, env, command or probe went through", container.Name)
			}
		}
		if typed.GenerateName != "" || typed.Status.PodIP != "" || typed.Spec.SecurityContext != nil || len(typed.Spec.EphemeralContainers) > 0 {
			t.Error("generateName, the pod IP, the security context or ephemeral containers went through")
		}
	case *corev1.Node:
		if len(typed.Status.Images) > 0 {
			t.Error("the node's images went through")
		}
	}
}

// TestDecodePageMalformed: an item that is not well-formed protobuf, at
// any depth the filter looks into, is an error naming the page's kind and,
// when its metadata reads, the object; never a panic.
func TestDecodePageMalformed(t *testing.T) {
	pod := edgePods()["init containers and a sidecar"]
	good := marshal(t, pod)
	spec, _, err := lastBytesField(good, objectSpecField)
	if err != nil {
		t.Fatal(err)
	}
	metadata, _, _ := lastBytesField(good, objectMetadataField)
	withSpec := func(spec []byte) []byte {
		out := protowire.AppendBytes(protowire.AppendTag(nil, objectMetadataField, protowire.BytesType), metadata)
		return protowire.AppendBytes(protowire.AppendTag(out, objectSpecField, protowire.BytesType), spec)
	}
	container := protowire.AppendBytes(protowire.AppendTag(nil, containerNameField, protowire.BytesType), []byte("c"))
	badPort := append(protowire.AppendTag(container, containerPortsField, protowire.BytesType), 0x05, 0x10) // 5 bytes said, 1 there
	for _, tc := range []struct {
		name, wantErr string
		item          []byte
	}{
		{name: "cut short", item: good[:len(good)-3], wantErr: "pods team/sidecar"},
		{name: "spec cut short", item: withSpec(spec[:len(spec)-2]), wantErr: "pods team/sidecar"},
		{name: "a port cut short in a container", wantErr: "pods team/sidecar",
			item: withSpec(protowire.AppendBytes(protowire.AppendTag(nil, podSpecContainersField, protowire.BytesType), badPort))},
		{name: "containers as a varint", wantErr: "pods team/sidecar",
			item: withSpec(protowire.AppendVarint(protowire.AppendTag(nil, podSpecContainersField, protowire.VarintType), 3))},
		{name: "metadata cut short", item: append(protowire.AppendTag(nil, objectMetadataField, protowire.BytesType), 0x30, 0x0a), wantErr: "item 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodePage(pageOf(tc.item), podsProto, func(client.Object) {})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "listing pods") {
				t.Fatalf("error %v, want one naming the pods list and %q", err, tc.wantErr)
			}
		})
	}
}

// pageOf is a PodList body, as the API server sends it, of one raw item.
func pageOf(item []byte) []byte {
	list := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), item)
	typeMeta, _ := (&runtime.TypeMeta{APIVersion: "v1", Kind: "PodList"}).Marshal()
	body := bytes.Clone(protobufPrefix)
	body = protowire.AppendBytes(protowire.AppendTag(body, 1, protowire.BytesType), typeMeta)
	return protowire.AppendBytes(protowire.AppendTag(body, 2, protowire.BytesType), list)
}

// TestDecodePageNeverPanics: every cut and every one-byte change of a
// page of API-server-shaped pods decodes or fails, never panics.
func TestDecodePageNeverPanics(t *testing.T) {
	generated := scaletest.Generate(scaletest.Size{Nodes: 2, BoundPods: 2, Seed: 5})
	page := pageOf(marshal(t, generated.BoundPods[0]))
	for cut := range len(page) {
		_, _ = decodePage(page[:cut], podsProto, func(client.Object) {})
	}
	for at := len(protobufPrefix); at < len(page); at++ {
		for _, b := range []byte{0x00, 0x02, 0x0a, 0x7f, 0x80, 0xff} {
			changed := bytes.Clone(page)
			changed[at] = b
			_, _ = decodePage(changed, podsProto, func(client.Object) {})
		}
	}
}

// TestDecodePageSharesSpecs: a page of API-server-shaped pods, replicas
// of a few Deployments on many nodes, pending ones and the edge cases,
// decoded and compacted as the cache does (specs, labels, annotations and
// owner references shared between replicas) is pod for pod the page
// decoded whole and compacted; and replicas do share one decoded spec.
func TestDecodePageSharesSpecs(t *testing.T) {
	generated := scaletest.Generate(scaletest.Size{Nodes: 40, BoundPods: 400, PendingPods: 40, Seed: 13})
	list := &corev1.PodList{}
	for _, pod := range append(generated.BoundPods, generated.PendingPods...) {
		list.Items = append(list.Items, *pod)
	}
	for _, pod := range edgePods() {
		list.Items = append(list.Items, *pod, *pod)
		list.Items[len(list.Items)-1].Spec.NodeName = "another-node"
	}
	body := encodeAs(t, runtime.ContentTypeProtobuf, list)
	var got []*corev1.Pod
	var compactor Compactor
	if _, err := decodePage(body, podsProto, func(obj client.Object) {
		compactor.Compact(obj)
		got = append(got, obj.(*corev1.Pod))
	}); err != nil {
		t.Fatal(err)
	}
	whole := &corev1.PodList{}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, whole); err != nil {
		t.Fatal(err)
	}
	var wholeCompactor Compactor
	priorities := map[*int32]int{}
	for i := range whole.Items {
		want := &whole.Items[i]
		wholeCompactor.Compact(want)
		if i >= len(got) || !reflect.DeepEqual(want, got[i]) {
			t.Fatalf("pod %d (%s) decoded with shared specs and compacted:\n%+v\nwant:\n%+v", i, want.Name, got[i], want)
		}
		priorities[got[i].Spec.Priority]++
	}
	if len(priorities) >= len(got)/2 {
		t.Errorf("%d pods hold %d distinct priority pointers: their specs were not shared", len(got), len(priorities))
	}
}
