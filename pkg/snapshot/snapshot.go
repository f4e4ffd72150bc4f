// Package snapshot is the one home of the cluster snapshot: the objects
// karpfunc decides from, and the single constructor that turns them into a
// scheduler.Input. The Provision pass, `karpfunc plan` and disruption all go
// through it, so the live loop and the offline planner see volume topology,
// namespaces and in-flight capacity by the same rules.
//
// A snapshot comes from List: one LIST per kind, nothing kept; or, when the
// reader List is given carries a Cache (WithCache), from the warm cache a
// long-lived handler keeps between invocations. The Cache's cold start
// counts the objects against the memory budget (MemoryBudget) before
// decoding any, then LISTs each kind (nodes in one LIST and pods in one
// LIST per namespace, a few at once, decoded as they stream in:
// PageReader; the others in pages of PageSize, each page read at the first
// one's resourceVersion) and starts a WATCH from the list's
// resourceVersion (pods: the lowest of their LISTs', skipping in each
// namespace what its LIST held) with bookmarks; a 410 Gone relists.
// Objects are compacted on arrival (Compact) and kept as the watch
// delivers them.
//
// Invariants:
//   - Freshness: a snapshot handed to a pass includes every change committed
//     before the pass asked for it. A cold pass's LISTs are consistent
//     reads, or (pods by namespace) reads at least as fresh as one: the
//     namespaces' list, made after the pass began; different namespaces'
//     pods may be whole at different resourceVersions, as different kinds'
//     objects always were. A warm pass reads the cluster's current
//     resourceVersion once with a quorum read (LIST of one namespace, no
//     resourceVersion: etcd's revision, one counter for every kind). A kind
//     is fresh when its watch has applied an event at or past it; else,
//     while its own watch is up from before the probe to after it, when
//     a freshness probe (a streaming list at that resourceVersion,
//     NotOlderThan, over a selector that matches nothing) gets its
//     initial-events-end bookmark, which the API server sends once its watch
//     cache of the kind has reached the revision, so every event up to it
//     has been handed to the kind's watchers, the cache's own among them.
//     One limit: an event the server has handed to the cache's watch but
//     not yet written on its stream can still be in flight when the probe's
//     bookmark arrives on another stream; only a bookmark on the watch itself
//     (1-2 s, the fallback) closes that. A kind whose probe is refused is
//     nudged for such a bookmark, or relisted when small or when its WATCH
//     requests fail, and a kind that does not catch up within CatchUp is
//     relisted (a consistent LIST). No bookmark or event short of the quorum
//     resourceVersion ever counts as caught up.
//   - Nothing the cache holds is written by a pass. NodePools and
//     AKSNodeClasses, whose status nodepoolstatus.Sync patches in place (a
//     controller-runtime Patch writes the answer into the object it was
//     given), are handed out as deep copies: a few objects. Everything else,
//     the 5,000 Nodes and NodeClaims and 150,000 pods of a cluster at AKS's
//     limits among them, is shared: the scheduler and the disruption engine
//     only read, and a pass that writes a Node or NodeClaim (a taint, an
//     annotation, a status condition) writes a copy. CacheOptions.CheckShared
//     proves it: the end-to-end tests run the handler with it and fail on a
//     SharedWriteError. A watch event replaces an object, never edits it, so
//     a snapshot stays as it was handed out for the whole pass.
//   - Input never copies or mutates the objects; it only sorts them into
//     pending pods, bound pods and capacity.
//   - A NodeClaim being deleted is never capacity; a finished pod never
//     consumes capacity; a DaemonSet pod or a pod being deleted is never
//     pending.
//   - A cluster too large for the memory at hand fails with
//     TooLargeError (counts, estimate, budget), before it is decoded.
//   - A snapshot is never handed out after its context ended: a pass out of
//     its invocation's time gets an OutOfTimeError naming the phase, and
//     passes call CheckTime again after solving, before they act.
package snapshot

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// Cluster holds the objects karpfunc decides from.
type Cluster struct {
	Pods                   []*corev1.Pod
	Nodes                  []*corev1.Node
	NodeClaims             []*karpv1.NodeClaim
	NodePools              []*karpv1.NodePool
	NodeClasses            []*v1beta1.AKSNodeClass
	DaemonSets             []*appsv1.DaemonSet
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	// Namespaces carry the labels pod (anti-)affinity namespaceSelectors
	// match.
	Namespaces []*corev1.Namespace
	// PodDisruptionBudgets decide which pods disruption may evict.
	PodDisruptionBudgets []*policyv1.PodDisruptionBudget
}

// ListError names the kind that could not be listed and keeps the cause.
type ListError struct {
	Kind string
	error
}

func (e *ListError) Error() string { return fmt.Sprintf("listing %s: %v", e.Kind, e.error) }
func (e *ListError) Unwrap() error { return e.error }

// Source hands out snapshots; *Cache is one.
type Source interface {
	Cluster(ctx context.Context) (*Cluster, error)
}

// Cached is a client whose List reads come from a Source: the passes take
// an ordinary Kubernetes client and get the warm cache's snapshots.
type Cached struct {
	client.Client
	Source Source
}

// WithCache wraps kube so that List(ctx, kube) reads from src.
func WithCache(kube client.Client, src Source) *Cached { return &Cached{Client: kube, Source: src} }

// List reads the cluster: from the reader's Source when it is Cached, else
// with one LIST per kind.
func List(ctx context.Context, kube client.Reader) (*Cluster, error) {
	if cached, ok := kube.(*Cached); ok {
		return cached.Source.Cluster(ctx)
	}
	started := time.Now()
	var (
		pods    corev1.PodList
		nodes   corev1.NodeList
		ncs     karpv1.NodeClaimList
		pools   karpv1.NodePoolList
		classes v1beta1.AKSNodeClassList
		dss     appsv1.DaemonSetList
		pvs     corev1.PersistentVolumeList
		pvcs    corev1.PersistentVolumeClaimList
		scs     storagev1.StorageClassList
		nss     corev1.NamespaceList
		pdbs    policyv1.PodDisruptionBudgetList
	)
	for _, l := range []struct {
		kind string
		list client.ObjectList
	}{
		{"pods", &pods}, {"nodes", &nodes}, {"nodeclaims", &ncs}, {"nodepools", &pools},
		{"aksnodeclasses", &classes}, {"daemonsets", &dss}, {"persistentvolumes", &pvs},
		{"persistentvolumeclaims", &pvcs}, {"storageclasses", &scs}, {"namespaces", &nss},
		{"poddisruptionbudgets", &pdbs},
	} {
		if err := kube.List(ctx, l.list); err != nil {
			return nil, timeErr(ctx, "snapshot", started, &ListError{Kind: l.kind, error: err})
		}
	}
	return &Cluster{
		Pods: ptrs(pods.Items), Nodes: ptrs(nodes.Items), NodeClaims: ptrs(ncs.Items),
		NodePools: ptrs(pools.Items), NodeClasses: ptrs(classes.Items), DaemonSets: ptrs(dss.Items),
		PersistentVolumes: ptrs(pvs.Items), PersistentVolumeClaims: ptrs(pvcs.Items),
		StorageClasses: ptrs(scs.Items), Namespaces: ptrs(nss.Items), PodDisruptionBudgets: ptrs(pdbs.Items),
	}, nil
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// PendingRule says which unbound pods are waiting for capacity.
type PendingRule func(*corev1.Pod) bool

// Live is the rule of the running loop: kube-scheduler has marked the pod
// Unschedulable (the test Karpenter applies).
func Live(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// Offline is the rule of `karpfunc plan`: every unbound pod in a dump is
// pending (dumps are often written by hand, without status).
func Offline(*corev1.Pod) bool { return true }

// Provisionable reports whether a pod is waiting for capacity under rule:
// not bound, not finished, not being deleted, not a DaemonSet pod (those
// follow their nodes), and accepted by rule.
func Provisionable(pod *corev1.Pod, rule PendingRule) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || Finished(pod) || OwnedByDaemonSet(pod) {
		return false
	}
	return rule(pod)
}

// Finished reports whether a pod has succeeded or failed: it holds no
// capacity and needs none.
func Finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// OwnedByDaemonSet reports whether a DaemonSet controls the pod.
func OwnedByDaemonSet(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && (ref.Controller == nil || *ref.Controller) {
			return true
		}
	}
	return false
}

// Input builds the scheduler's snapshot: pods with a nodeName that have not
// finished are bound (they consume capacity), unbound pods rule calls
// pending are to be placed, NodeClaims being deleted are left out.
func (c *Cluster) Input(cat *catalog.Catalog, rule PendingRule) scheduler.Input {
	in := scheduler.Input{
		Nodes: c.Nodes, NodePools: c.NodePools, NodeClasses: c.NodeClasses, DaemonSets: c.DaemonSets, Catalog: cat,
		PersistentVolumes: c.PersistentVolumes, PersistentVolumeClaims: c.PersistentVolumeClaims,
		StorageClasses: c.StorageClasses, Namespaces: c.Namespaces,
	}
	in.NodeClaims = make([]*karpv1.NodeClaim, 0, len(c.NodeClaims))
	for _, nc := range c.NodeClaims {
		if nc.DeletionTimestamp == nil {
			in.NodeClaims = append(in.NodeClaims, nc)
		}
	}
	for _, p := range c.Pods {
		switch {
		case p.Spec.NodeName != "":
			if !Finished(p) {
				in.BoundPods = append(in.BoundPods, p)
			}
		case Provisionable(p, rule):
			in.Pods = append(in.Pods, p)
		}
	}
	return in
}
