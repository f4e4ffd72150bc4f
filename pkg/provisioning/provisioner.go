// Package provisioning turns pending pods into NodeClaims and launched VMs.
//
// It reads the whole snapshot from the API server on every call (messages are
// triggers, not state), asks the pure scheduler where pods go, creates the
// NodeClaims it decides on, and launches every NodeClaim that is not launched
// yet. Every step is idempotent: NodeClaim names are derived from their pods,
// the launcher GETs before it PUTs, and in-flight NodeClaims count as capacity
// on the next pass, so a re-delivered message creates nothing new.
package provisioning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// InstanceLauncher creates VMs; *azure.Launcher implements it.
type InstanceLauncher interface {
	Create(ctx context.Context, req azure.LaunchRequest) (*azure.Instance, error)
}

// Options configure a Provisioner.
type Options struct {
	Kube        client.Client
	Launcher    InstanceLauncher
	Catalog     *catalog.Catalog
	ClusterName string
	Clock       clock.Clock
	Logger      *slog.Logger
}

// Provisioner places pending pods.
type Provisioner struct {
	kube        client.Client
	launcher    InstanceLauncher
	catalog     *catalog.Catalog
	clusterName string
	clock       clock.Clock
	log         *slog.Logger
	recorder    *events.Recorder
}

// New returns a Provisioner.
func New(opts Options) *Provisioner {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Provisioner{kube: opts.Kube, launcher: opts.Launcher, catalog: opts.Catalog, clusterName: opts.ClusterName,
		clock: opts.Clock, log: opts.Logger, recorder: events.NewRecorder(opts.Kube, opts.Clock)}
}

// Result summarises one provisioning pass.
type Result struct {
	PendingPods   int
	Created       []string // NodeClaims created by this pass
	Launched      []string // NodeClaims launched by this pass (new or left over from an earlier pass)
	OnExisting    int      // pods placed on existing nodes or in-flight NodeClaims
	Unschedulable int
	SolveDuration time.Duration
}

// Provision runs one pass. It returns an error only when something should be
// retried (API or ARM failures); pods that cannot be placed are reported with
// events, not errors, because retrying would not help them.
func (p *Provisioner) Provision(ctx context.Context) (Result, error) {
	snap, err := p.snapshot(ctx)
	if err != nil {
		return Result{}, err
	}
	res := Result{PendingPods: len(snap.pending)}
	var errs []error
	if len(snap.pending) > 0 {
		start := p.clock.Now()
		out := scheduler.Solve(scheduler.Input{
			Pods: snap.pending, Nodes: snap.nodes, BoundPods: snap.bound, NodeClaims: snap.nodeClaims,
			NodePools: snap.nodePools, NodeClasses: snap.nodeClasses, DaemonSets: snap.daemonSets, Catalog: p.catalog,
		})
		res.SolveDuration = p.clock.Since(start)
		for _, pl := range out.Existing {
			res.OnExisting += len(pl.Pods)
		}
		res.Unschedulable = len(out.Unschedulable)
		for _, u := range out.Unschedulable {
			if err := p.recorder.Publish(ctx, events.Event{Object: u.Pod, Type: corev1.EventTypeWarning,
				Reason: events.ReasonFailedScheduling, Message: "karpfunc: " + u.Reason}); err != nil {
				errs = append(errs, err)
			}
		}
		for _, plan := range out.NewNodeClaims {
			nc, err := p.create(ctx, plan)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if nc != nil {
				res.Created = append(res.Created, nc.Name)
				snap.nodeClaims = append(snap.nodeClaims, nc)
			}
		}
	}
	// Launch everything not launched yet: the claims just created and any an
	// earlier, interrupted pass left behind.
	for _, nc := range snap.nodeClaims {
		if nc.DeletionTimestamp != nil || nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
			continue
		}
		if err := p.Launch(ctx, nc); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Launched = append(res.Launched, nc.Name)
	}
	return res, errors.Join(errs...)
}

type snapshot struct {
	pending, bound []*corev1.Pod
	nodes          []*corev1.Node
	nodeClaims     []*karpv1.NodeClaim
	nodePools      []*karpv1.NodePool
	nodeClasses    []*v1beta1.AKSNodeClass
	daemonSets     []*appsv1.DaemonSet
}

func (p *Provisioner) snapshot(ctx context.Context) (*snapshot, error) {
	var (
		pods   corev1.PodList
		nodes  corev1.NodeList
		ncs    karpv1.NodeClaimList
		pools  karpv1.NodePoolList
		class  v1beta1.AKSNodeClassList
		dsList appsv1.DaemonSetList
	)
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{{"pods", &pods}, {"nodes", &nodes}, {"nodeclaims", &ncs}, {"nodepools", &pools}, {"aksnodeclasses", &class}, {"daemonsets", &dsList}} {
		if err := p.kube.List(ctx, l.list); err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	s := &snapshot{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		switch {
		case pod.Spec.NodeName != "":
			if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				s.bound = append(s.bound, pod)
			}
		case IsProvisionable(pod):
			s.pending = append(s.pending, pod)
		}
	}
	for i := range nodes.Items {
		s.nodes = append(s.nodes, &nodes.Items[i])
	}
	for i := range ncs.Items {
		s.nodeClaims = append(s.nodeClaims, &ncs.Items[i])
	}
	for i := range pools.Items {
		s.nodePools = append(s.nodePools, &pools.Items[i])
	}
	for i := range class.Items {
		s.nodeClasses = append(s.nodeClasses, &class.Items[i])
	}
	for i := range dsList.Items {
		s.daemonSets = append(s.daemonSets, &dsList.Items[i])
	}
	return s, nil
}

// IsProvisionable reports whether a pod is waiting for capacity: not bound,
// not terminating, not a DaemonSet pod (those follow their nodes), and marked
// Unschedulable by kube-scheduler — the same test Karpenter applies.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" {
			return false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
