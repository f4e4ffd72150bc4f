package snapshot

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// protoNumber is the protobuf field number of typ's Go field name, from
// its generated `protobuf:"bytes,1,opt,name=metadata"` struct tag.
func protoNumber(t *testing.T, typ reflect.Type, name string) protowire.Number {
	t.Helper()
	field, ok := typ.FieldByName(name)
	if !ok {
		t.Fatalf("%s has no field %s: k8s.io/api changed; update wire.go", typ, name)
	}
	tag := field.Tag.Get("protobuf")
	parts := strings.Split(tag, ",")
	if len(parts) < 2 {
		t.Fatalf("%s.%s has no protobuf tag (%q)", typ, name, tag)
	}
	number, err := strconv.Atoi(parts[1])
	if err != nil {
		t.Fatalf("%s.%s protobuf tag %q: %v", typ, name, tag, err)
	}
	return protowire.Number(number)
}

// TestWireFieldNumbers checks every field number wire.go hard-codes
// against the generated types of k8s.io/api and apimachinery, so a
// renumbering there (or a field that moved) fails here before the filter
// drops or keeps the wrong field.
func TestWireFieldNumbers(t *testing.T) {
	pod, node := reflect.TypeFor[corev1.Pod](), reflect.TypeFor[corev1.Node]()
	meta := reflect.TypeFor[metav1.ObjectMeta]()
	spec, container := reflect.TypeFor[corev1.PodSpec](), reflect.TypeFor[corev1.Container]()
	status := reflect.TypeFor[corev1.PodStatus]()
	containerStatus := reflect.TypeFor[corev1.ContainerStatus]()
	for _, tc := range []struct {
		constant protowire.Number
		typ      reflect.Type
		field    string
	}{
		{objectMetadataField, pod, "ObjectMeta"},
		{objectSpecField, pod, "Spec"},
		{objectStatusField, pod, "Status"},
		{objectMetadataField, node, "ObjectMeta"},
		{objectSpecField, node, "Spec"},
		{objectStatusField, node, "Status"},

		{metaNameField, meta, "Name"},
		{metaGenerateNameField, meta, "GenerateName"},
		{metaNamespaceField, meta, "Namespace"},
		{metaAnnotationsField, meta, "Annotations"},
		{managedFieldsField, meta, "ManagedFields"},

		{podSpecVolumesField, spec, "Volumes"},
		{podSpecContainersField, spec, "Containers"},
		{podSpecDNSPolicyField, spec, "DNSPolicy"},
		{podSpecServiceAccountNameField, spec, "ServiceAccountName"},
		{podSpecDeprecatedServiceAccountField, spec, "DeprecatedServiceAccount"},
		{podSpecSecurityContextField, spec, "SecurityContext"},
		{podSpecImagePullSecretsField, spec, "ImagePullSecrets"},
		{podSpecHostnameField, spec, "Hostname"},
		{podSpecSubdomainField, spec, "Subdomain"},
		{podSpecInitContainersField, spec, "InitContainers"},
		{podSpecHostAliasesField, spec, "HostAliases"},
		{podSpecDNSConfigField, spec, "DNSConfig"},
		{podSpecEphemeralContainersField, spec, "EphemeralContainers"},

		{containerNameField, container, "Name"},
		{containerPortsField, container, "Ports"},
		{containerResourcesField, container, "Resources"},
		{containerResizePolicyField, container, "ResizePolicy"},
		{containerRestartPolicyField, container, "RestartPolicy"},

		{containerPortHostPortField, reflect.TypeFor[corev1.ContainerPort](), "HostPort"},

		{volumeSourceField, reflect.TypeFor[corev1.Volume](), "VolumeSource"},
		{volumeSourcePVCField, reflect.TypeFor[corev1.VolumeSource](), "PersistentVolumeClaim"},
		{volumeSourceEphemeralField, reflect.TypeFor[corev1.VolumeSource](), "Ephemeral"},

		{podStatusConditionsField, status, "Conditions"},
		{podStatusHostIPField, status, "HostIP"},
		{podStatusPodIPField, status, "PodIP"},
		{podStatusContainerStatusesField, status, "ContainerStatuses"},
		{podStatusQOSClassField, status, "QOSClass"},
		{podStatusInitContainerStatusesField, status, "InitContainerStatuses"},
		{podStatusPodIPsField, status, "PodIPs"},
		{podStatusEphemeralContainerStatusesField, status, "EphemeralContainerStatuses"},
		{podStatusHostIPsField, status, "HostIPs"},

		{podConditionTypeField, reflect.TypeFor[corev1.PodCondition](), "Type"},

		{containerStatusNameField, containerStatus, "Name"},
		{containerStatusAllocatedResourcesField, containerStatus, "AllocatedResources"},
		{containerStatusResourcesField, containerStatus, "Resources"},

		{nodeStatusImagesField, reflect.TypeFor[corev1.NodeStatus](), "Images"},
	} {
		if got := protoNumber(t, tc.typ, tc.field); got != tc.constant {
			t.Errorf("wire.go has %d for %s.%s; its generated protobuf tag says %d", tc.constant, tc.typ, tc.field, got)
		}
	}
}

// TestWireMapEntryKey: a map field is encoded as entries whose key is
// field mapEntryKeyField; checked on what the generated Marshal writes for
// an annotation.
func TestWireMapEntryKey(t *testing.T) {
	meta := metav1.ObjectMeta{Annotations: map[string]string{"the-key": "the-value"}}
	data, err := meta.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		data = data[n:]
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		if num == metaAnnotationsField {
			entry, _ := protowire.ConsumeBytes(data[:n])
			key, keyType, m := protowire.ConsumeTag(entry)
			if m < 0 || keyType != protowire.BytesType {
				t.Fatalf("annotation entry %x does not start with a bytes field", entry)
			}
			text, _ := protowire.ConsumeString(entry[m:])
			if key != mapEntryKeyField || text != "the-key" {
				t.Errorf("the annotation's key is field %d (%q); wire.go reads field %d", key, text, mapEntryKeyField)
			}
			return
		}
		data = data[n:]
	}
	t.Fatalf("no field %d (annotations) in the encoded ObjectMeta", metaAnnotationsField)
}
