package snapshot

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// kindSpec is one kind the snapshot holds: how to list it, whether the
// passes write to its objects (then every snapshot gets copies), what an
// object costs in memory once stripped (for the budget), and where it goes
// in a Cluster.
type kindSpec struct {
	name    string
	newList func() client.ObjectList
	// copyOnRead: the passes write these objects in place
	// (nodepoolstatus.Sync patches NodePool and AKSNodeClass status into
	// the objects it is given), so a snapshot hands out deep copies and the
	// cache's own objects stay as the watch delivered them. Only the small
	// kinds are copied: every other kind is shared, and a pass that writes
	// one of its objects copies it first (CacheOptions.CheckShared proves
	// it in the end-to-end tests).
	copyOnRead bool
	// bytesPerObject is the heap one stripped object of this kind costs,
	// for objects shaped as the API server serves them (hack/benchscale's
	// cluster) with some margin; the budget multiplies it by the object
	// count.
	bytesPerObject int64
	// proto: a core kind a PageReader can read.
	proto *protoKind
	fill  func(c *Cluster, objs []client.Object)
}

func fillInto[T any, PT interface {
	*T
	client.Object
}](dst func(*Cluster) *[]PT) func(*Cluster, []client.Object) {
	return func(c *Cluster, objs []client.Object) {
		out := make([]PT, len(objs))
		for i, o := range objs {
			out[i] = o.(PT)
		}
		*dst(c) = out
	}
}

// The kinds a PageReader reads.
var (
	nodesProto = &protoKind{resource: "nodes", listKind: "NodeList", newItem: func() protoObject { return &corev1.Node{} }, wire: nodeWireRule}
	podsProto  = &protoKind{resource: "pods", listKind: "PodList", namespaced: true, newItem: func() protoObject { return &corev1.Pod{} }, wire: podWireRule}
)

// kinds are read in this order; pods last, as the biggest.
var kinds = []kindSpec{
	{name: "nodeclaims", newList: func() client.ObjectList { return &karpv1.NodeClaimList{} }, bytesPerObject: 6 << 10,
		fill: fillInto(func(c *Cluster) *[]*karpv1.NodeClaim { return &c.NodeClaims })},
	{name: "nodes", newList: func() client.ObjectList { return &corev1.NodeList{} }, bytesPerObject: 8 << 10,
		proto: nodesProto,
		fill:  fillInto(func(c *Cluster) *[]*corev1.Node { return &c.Nodes })},
	{name: "nodepools", newList: func() client.ObjectList { return &karpv1.NodePoolList{} }, copyOnRead: true, bytesPerObject: 8 << 10,
		fill: fillInto(func(c *Cluster) *[]*karpv1.NodePool { return &c.NodePools })},
	{name: "aksnodeclasses", newList: func() client.ObjectList { return &v1beta1.AKSNodeClassList{} }, copyOnRead: true, bytesPerObject: 16 << 10,
		fill: fillInto(func(c *Cluster) *[]*v1beta1.AKSNodeClass { return &c.NodeClasses })},
	{name: "daemonsets", newList: func() client.ObjectList { return &appsv1.DaemonSetList{} }, bytesPerObject: 8 << 10,
		fill: fillInto(func(c *Cluster) *[]*appsv1.DaemonSet { return &c.DaemonSets })},
	{name: "persistentvolumes", newList: func() client.ObjectList { return &corev1.PersistentVolumeList{} }, bytesPerObject: 3 << 10,
		fill: fillInto(func(c *Cluster) *[]*corev1.PersistentVolume { return &c.PersistentVolumes })},
	{name: "persistentvolumeclaims", newList: func() client.ObjectList { return &corev1.PersistentVolumeClaimList{} }, bytesPerObject: 3 << 10,
		fill: fillInto(func(c *Cluster) *[]*corev1.PersistentVolumeClaim { return &c.PersistentVolumeClaims })},
	{name: "storageclasses", newList: func() client.ObjectList { return &storagev1.StorageClassList{} }, bytesPerObject: 2 << 10,
		fill: fillInto(func(c *Cluster) *[]*storagev1.StorageClass { return &c.StorageClasses })},
	{name: "namespaces", newList: func() client.ObjectList { return &corev1.NamespaceList{} }, bytesPerObject: 2 << 10,
		fill: fillInto(func(c *Cluster) *[]*corev1.Namespace { return &c.Namespaces })},
	{name: "poddisruptionbudgets", newList: func() client.ObjectList { return &policyv1.PodDisruptionBudgetList{} }, bytesPerObject: 2 << 10,
		fill: fillInto(func(c *Cluster) *[]*policyv1.PodDisruptionBudget { return &c.PodDisruptionBudgets })},
	{name: "pods", newList: func() client.ObjectList { return &corev1.PodList{} }, bytesPerObject: 6 << 10,
		proto: podsProto,
		fill:  fillInto(func(c *Cluster) *[]*corev1.Pod { return &c.Pods })},
}

// BytesPerObject is the heap the memory budget counts for one compacted
// object of kind (a resource name: "pods", "nodes"...), 0 for a kind the
// cache does not read; hack/benchscale checks the measured heap against it.
func BytesPerObject(kind string) int64 {
	for i := range kinds {
		if kinds[i].name == kind {
			return kinds[i].bytesPerObject
		}
	}
	return 0
}
