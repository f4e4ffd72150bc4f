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
	// copyOnRead: the passes patch these objects in place (a patch writes
	// the server's answer into the object it was given), so a snapshot
	// hands out deep copies and the cache's own objects stay as the watch
	// delivered them.
	copyOnRead bool
	// bytesPerObject is the heap one stripped object of this kind costs,
	// measured on the bench cluster's objects (hack/benchscale) with some
	// margin; the budget multiplies it by the object count.
	bytesPerObject int64
	fill           func(c *Cluster, objs []client.Object)
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

// kinds are read in this order; pods last, as the biggest.
var kinds = []kindSpec{
	{name: "nodeclaims", newList: func() client.ObjectList { return &karpv1.NodeClaimList{} }, copyOnRead: true, bytesPerObject: 6 << 10,
		fill: fillInto(func(c *Cluster) *[]*karpv1.NodeClaim { return &c.NodeClaims })},
	{name: "nodes", newList: func() client.ObjectList { return &corev1.NodeList{} }, copyOnRead: true, bytesPerObject: 8 << 10,
		fill: fillInto(func(c *Cluster) *[]*corev1.Node { return &c.Nodes })},
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
		fill: fillInto(func(c *Cluster) *[]*corev1.Pod { return &c.Pods })},
}

// lastApplied is kubectl's copy of the whole object in an annotation: often
// the biggest thing on an object, and nothing karpfunc decides by.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Strip drops from an object, as it arrives, the fields no pass reads:
// managedFields and kubectl's last-applied annotation on every kind; on
// pods the containers' env, command, args, probes and lifecycle hooks, and
// of each container status everything but its name, readiness and
// resources (requests follow in-place resizes through the statuses); on
// nodes the image list. The cache keeps only stripped objects. A field the
// engine starts to read must come off this list.
func Strip(obj client.Object) {
	obj.SetManagedFields(nil)
	if ann := obj.GetAnnotations(); ann != nil {
		if _, ok := ann[lastApplied]; ok {
			delete(ann, lastApplied)
		}
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		stripContainers(o.Spec.InitContainers)
		stripContainers(o.Spec.Containers)
		o.Status.ContainerStatuses = stripStatuses(o.Status.ContainerStatuses)
		o.Status.InitContainerStatuses = stripStatuses(o.Status.InitContainerStatuses)
		o.Status.EphemeralContainerStatuses = nil
	case *corev1.Node:
		o.Status.Images = nil
	}
}

func stripContainers(cs []corev1.Container) {
	for i := range cs {
		c := &cs[i]
		c.Env, c.EnvFrom, c.Command, c.Args = nil, nil, nil, nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		c.VolumeMounts, c.TerminationMessagePath = nil, ""
	}
}

func stripStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(ss) == 0 {
		return ss
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i := range ss {
		out[i] = corev1.ContainerStatus{Name: ss[i].Name, Ready: ss[i].Ready, Started: ss[i].Started,
			Resources: ss[i].Resources, AllocatedResources: ss[i].AllocatedResources}
	}
	return out
}
