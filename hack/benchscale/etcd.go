package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

// etcdTxnOps is how many puts go in one etcd transaction: under etcd's
// --max-txn-ops (128) and, at a few kB a pod, its --max-request-bytes
// (1.5 MiB).
const etcdTxnOps = 64

// etcdLoader writes objects straight into etcd as kube-apiserver stores
// them: under /registry/<resource>/[<namespace>/]<name>, built-in kinds as
// protobuf ("k8s\x00" and a runtime.Unknown), custom resources as JSON,
// with a uid, a creationTimestamp and managedFields; the resourceVersion is
// etcd's revision of the key, as for any stored object. Through the API
// server, each pod is a create and a status update, admission, field
// management and a write (about 60 pods a second on this machine);
// through etcd's JSON gateway it is one put in a batch. The API server's
// watch cache sees the puts as it sees its own writes.
type etcdLoader struct {
	url   string
	http  *http.Client
	proto *protobuf.Serializer
}

func newEtcdLoader(url string) *etcdLoader {
	return &etcdLoader{url: url, http: &http.Client{Timeout: time.Minute}, proto: protobuf.NewSerializer(apis.Scheme, apis.Scheme)}
}

// etcdKey is where kube-apiserver keeps obj (its default --etcd-prefix).
func etcdKey(obj client.Object) (string, error) {
	switch obj.(type) {
	case *corev1.Pod:
		return "/registry/pods/" + obj.GetNamespace() + "/" + obj.GetName(), nil
	case *corev1.Node:
		return "/registry/minions/" + obj.GetName(), nil
	case *karpv1.NodeClaim:
		return "/registry/karpenter.sh/nodeclaims/" + obj.GetName(), nil
	}
	return "", fmt.Errorf("the etcd loader does not store %T", obj)
}

// encode is obj's stored form; it sets what the API server sets on create.
func (l *etcdLoader) encode(obj client.Object, gvk metav1.TypeMeta) ([]byte, error) {
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.Now())
	obj.GetObjectKind().SetGroupVersionKind(gvk.GroupVersionKind())
	if _, custom := obj.(*karpv1.NodeClaim); custom {
		return json.Marshal(obj)
	}
	var buf bytes.Buffer
	err := l.proto.Encode(obj, &buf)
	return buf.Bytes(), err
}

type etcdPut struct {
	Key   []byte `json:"key"` // base64 in JSON, as the gateway wants bytes
	Value []byte `json:"value"`
}

// put stores objs in transactions of etcdTxnOps.
func (l *etcdLoader) put(ctx context.Context, objs []client.Object) error {
	for start := 0; start < len(objs); start += etcdTxnOps {
		batch := objs[start:min(start+etcdTxnOps, len(objs))]
		ops := make([]map[string]etcdPut, 0, len(batch))
		for _, obj := range batch {
			key, err := etcdKey(obj)
			if err != nil {
				return err
			}
			value, err := l.encode(obj, typeMeta(obj))
			if err != nil {
				return fmt.Errorf("encoding %s: %w", key, err)
			}
			ops = append(ops, map[string]etcdPut{"requestPut": {Key: []byte(key), Value: value}})
		}
		if err := l.post(ctx, "/v3/kv/txn", map[string]any{"success": ops}); err != nil {
			return err
		}
	}
	return nil
}

func typeMeta(obj client.Object) metav1.TypeMeta {
	switch obj.(type) {
	case *corev1.Pod:
		return metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	case *corev1.Node:
		return metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	}
	return metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"}
}

// post sends one request to etcd's v3 JSON gateway and fails on anything
// but 200 (the gateway answers errors as {"error": ..., "code": ...}).
func (l *etcdLoader) post(ctx context.Context, path string, body any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.http.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, strings.TrimSpace(string(answer)))
	}
	return nil
}

// fieldsV1 builds a managedFields entry's field set: "f:" keys for the
// named fields, each empty.
func fieldsV1(fields map[string]any) *metav1.FieldsV1 {
	raw, _ := json.Marshal(fields)
	return &metav1.FieldsV1{Raw: raw}
}

func managedEntry(manager, subresource string, now metav1.Time, fields map[string]any) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &now, FieldsType: "FieldsV1", FieldsV1: fieldsV1(fields), Subresource: subresource}
}

// leaf is a set of empty "f:" fields.
func leaf(names ...string) map[string]any {
	out := map[string]any{}
	for _, name := range names {
		out["f:"+name] = map[string]any{}
	}
	return out
}

// podManagedFields are the two entries a ReplicaSet's pod carries once the
// kubelet reported: kube-controller-manager's spec and the kubelet's status.
func podManagedFields(pod *corev1.Pod, now metav1.Time) []metav1.ManagedFieldsEntry {
	labels := leaf()
	for name := range pod.Labels {
		labels["f:"+name] = map[string]any{}
	}
	container := leaf("env", "image", "imagePullPolicy", "name", "ports", "readinessProbe", "resources", "terminationMessagePath", "terminationMessagePolicy")
	spec := map[string]any{
		"f:metadata": map[string]any{"f:annotations": leaf("kubectl.kubernetes.io/restartedAt", "prometheus.io/port", "prometheus.io/scrape"),
			"f:generateName": map[string]any{}, "f:labels": labels,
			"f:ownerReferences": map[string]any{`k:{"uid":"` + string(pod.OwnerReferences[0].UID) + `"}`: map[string]any{}}},
		"f:spec": map[string]any{"f:containers": map[string]any{`k:{"name":"main"}`: container},
			"f:dnsPolicy": map[string]any{}, "f:enableServiceLinks": map[string]any{}, "f:restartPolicy": map[string]any{},
			"f:schedulerName": map[string]any{}, "f:securityContext": map[string]any{}, "f:terminationGracePeriodSeconds": map[string]any{},
			"f:tolerations": map[string]any{}, "f:topologySpreadConstraints": map[string]any{}, "f:affinity": map[string]any{}},
	}
	conditions := map[string]any{}
	for _, cond := range pod.Status.Conditions {
		conditions[`k:{"type":"`+string(cond.Type)+`"}`] = leaf("lastProbeTime", "lastTransitionTime", "status", "type")
	}
	status := map[string]any{"f:status": map[string]any{"f:conditions": conditions, "f:containerStatuses": map[string]any{},
		"f:hostIP": map[string]any{}, "f:hostIPs": map[string]any{}, "f:phase": map[string]any{}, "f:podIP": map[string]any{},
		"f:podIPs": map[string]any{}, "f:startTime": map[string]any{}}}
	if pod.Spec.NodeName == "" {
		return []metav1.ManagedFieldsEntry{managedEntry("kube-controller-manager", "", now, spec),
			managedEntry("kube-scheduler", "status", now, map[string]any{"f:status": map[string]any{"f:conditions": conditions}})}
	}
	return []metav1.ManagedFieldsEntry{managedEntry("kube-controller-manager", "", now, spec), managedEntry("kubelet", "status", now, status)}
}

// nodeManagedFields: the kubelet's registration and status, and
// kube-controller-manager's podCIDR.
func nodeManagedFields(node *corev1.Node, now metav1.Time) []metav1.ManagedFieldsEntry {
	labels := leaf()
	for name := range node.Labels {
		labels["f:"+name] = map[string]any{}
	}
	conditions := map[string]any{}
	for _, cond := range node.Status.Conditions {
		conditions[`k:{"type":"`+string(cond.Type)+`"}`] = leaf("lastHeartbeatTime", "lastTransitionTime", "message", "reason", "status", "type")
	}
	return []metav1.ManagedFieldsEntry{
		managedEntry("kubelet", "", now, map[string]any{"f:metadata": map[string]any{"f:annotations": leaf(), "f:labels": labels}, "f:spec": leaf("providerID")}),
		managedEntry("kube-controller-manager", "", now, map[string]any{"f:spec": leaf("podCIDR", "podCIDRs")}),
		managedEntry("kubelet", "status", now, map[string]any{"f:status": map[string]any{"f:addresses": map[string]any{}, "f:allocatable": map[string]any{},
			"f:capacity": map[string]any{}, "f:conditions": conditions, "f:images": map[string]any{}, "f:nodeInfo": map[string]any{}}}),
	}
}
