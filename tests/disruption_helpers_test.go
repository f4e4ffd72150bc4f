package tests

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// fleetWatch samples a NodePool's fleet every 250 ms while disruption
// works on it: how many of its NodeClaims are disrupting (deleting, or
// their Node tainted karpenter.sh/disrupted) against what the pool's
// budgets allow at that moment, how long the pods pinned to the pool by
// nodeSelector stay unscheduled, and which NodeClaims were launched for
// pods rather than as a disruption command's replacements.
type fleetWatch struct {
	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}

	samples int
	// overBudget are the samples where more NodeClaims were disrupting
	// than the budgets allowed, described.
	overBudget     []string
	mostDisrupting int
	// pendingSince is when each unscheduled pod was created, by UID.
	started      time.Time
	pendingSince map[types.UID]time.Time
	pendingName  map[types.UID]string
	recorded     map[types.UID]bool
	// bound counts the pods created during the watch that were bound.
	bound int
	// longestPending is the longest any pod stayed unscheduled, and which.
	longestPending    time.Duration
	longestPendingPod string
	// provisioned are the NodeClaims created during the watch without a
	// disruption command's annotation when first seen: launched for
	// pending pods (a replacement keeps the annotation until it is
	// Initialized, seconds after a sample sees it).
	provisioned []string
	seenClaims  map[string]bool
	// validating: some sample saw a NodeClaim marked as a candidate of a
	// command awaiting its validation.
	validating bool
}

func watchFleet(ctx context.Context, kube client.Client, pool string) *fleetWatch {
	w := &fleetWatch{stop: make(chan struct{}), done: make(chan struct{}), started: time.Now().Truncate(time.Second),
		pendingSince: map[types.UID]time.Time{}, pendingName: map[types.UID]string{}, recorded: map[types.UID]bool{}, seenClaims: map[string]bool{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			w.sample(ctx, kube, pool)
		}
	}()
	return w
}

func (w *fleetWatch) sample(ctx context.Context, kube client.Client, pool string) {
	var (
		np    karpv1.NodePool
		ncs   karpv1.NodeClaimList
		nodes corev1.NodeList
		pods  corev1.PodList
	)
	if kube.Get(ctx, client.ObjectKey{Name: pool}, &np) != nil ||
		kube.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}) != nil ||
		kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}) != nil ||
		kube.List(ctx, &pods, client.InNamespace("default")) != nil {
		return
	}
	now := time.Now()
	tainted := map[string]bool{}
	for _, n := range nodes.Items {
		for _, taint := range n.Spec.Taints {
			if taint.Key == karpv1.DisruptedTaintKey {
				tainted[n.Name] = true
			}
		}
	}
	var disrupting []string
	for _, nc := range ncs.Items {
		if nc.DeletionTimestamp != nil || tainted[nc.Status.NodeName] {
			disrupting = append(disrupting, nc.Name)
		}
	}
	allowed := allowedDisruptions(&np, len(ncs.Items))

	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	w.mostDisrupting = max(w.mostDisrupting, len(disrupting))
	for _, nc := range ncs.Items {
		if nc.Annotations[apis.AnnotationDisruptionValidating] != "" {
			w.validating = true
		}
		if w.seenClaims[nc.Name] {
			continue
		}
		w.seenClaims[nc.Name] = true
		if !nc.CreationTimestamp.Time.Before(w.started) && nc.Annotations[apis.AnnotationDisruptionCommand] == "" {
			w.provisioned = append(w.provisioned, nc.Name)
		}
	}
	if len(disrupting) > allowed {
		w.overBudget = append(w.overBudget, fmt.Sprintf("%s: %d of %d NodeClaims disrupting (%s), budget allows %d",
			now.Format("15:04:05.000"), len(disrupting), len(ncs.Items), strings.Join(disrupting, ", "), allowed))
	}
	unscheduled := map[types.UID]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeSelector[karpv1.NodePoolLabelKey] != pool || p.CreationTimestamp.Time.Before(w.started) {
			continue // other pools' pods (one expiring meanwhile), and pods from before the watch
		}
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && !snapshot.Finished(&p) {
			unscheduled[p.UID] = true
			if _, seen := w.pendingSince[p.UID]; !seen {
				w.pendingSince[p.UID] = p.CreationTimestamp.Time
				w.pendingName[p.UID] = p.Name
			}
			continue
		}
		// Bound: how long it waited, from its PodScheduled condition
		// (pods bound between two samples are counted too).
		if w.recorded[p.UID] {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				w.notePending(p.Name, c.LastTransitionTime.Sub(p.CreationTimestamp.Time))
				w.recorded[p.UID] = true
				w.bound++
			}
		}
	}
	for uid, since := range w.pendingSince {
		if unscheduled[uid] {
			continue
		}
		if !w.recorded[uid] { // gone before it was bound
			w.notePending(w.pendingName[uid]+" (deleted unbound)", now.Sub(since))
		}
		delete(w.pendingSince, uid)
		delete(w.pendingName, uid)
	}
}

func (w *fleetWatch) notePending(pod string, d time.Duration) {
	if d >= w.longestPending {
		w.longestPending, w.longestPendingPod = d, pod
	}
}

// result stops the watch; pods still unscheduled count up to now.
func (w *fleetWatch) result() *fleetWatch {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, since := range w.pendingSince {
		w.notePending(w.pendingName[uid]+" (still pending)", time.Since(since))
	}
	return w
}

// allowedDisruptions is what the pool's budgets allow at once for total
// nodes, Karpenter's way: percentages of the pool's nodes rounded up, the
// most restrictive budget without a schedule winning (the test's pools set
// none with a schedule); no budget at all means Karpenter's default 10 %.
func allowedDisruptions(np *karpv1.NodePool, total int) int {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{{Nodes: "10%"}}
	}
	allowed := math.MaxInt
	for _, b := range budgets {
		if b.Schedule != nil {
			continue
		}
		v := intstr.Parse(b.Nodes)
		n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, true)
		if err != nil {
			continue
		}
		allowed = min(allowed, n)
	}
	return allowed
}

// launchTimes is how long each NodeClaim took from creation to Initialized.
func launchTimes(ncs []karpv1.NodeClaim) []time.Duration {
	var out []time.Duration
	for _, nc := range ncs {
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized); c != nil && c.IsTrue() {
			out = append(out, c.LastTransitionTime.Sub(nc.CreationTimestamp.Time))
		}
	}
	return out
}

// planPrice is what `karpfunc plan` pays for the pool's pods as they are
// now: the nodes holding a pod that may not be disrupted stay where they
// are (with their pods), every other pod of the pool is placed afresh by
// the same snapshot and scheduler the live loop and `plan` use.
func planPrice(t *testing.T, ctx context.Context, kube client.Client, cat *catalog.Catalog, pool string) (float64, string) {
	t.Helper()
	c, err := snapshot.List(ctx, kube)
	if err != nil {
		t.Fatal(err)
	}
	poolNode := map[string]*corev1.Node{}
	for _, n := range c.Nodes {
		if n.Labels[karpv1.NodePoolLabelKey] == pool {
			poolNode[n.Name] = n
		}
	}
	kept := map[string]bool{}
	for _, p := range c.Pods {
		if poolNode[p.Spec.NodeName] != nil && p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			kept[p.Spec.NodeName] = true
		}
	}
	in := snapshot.Cluster{NodeClasses: c.NodeClasses, DaemonSets: c.DaemonSets, Namespaces: c.Namespaces,
		PersistentVolumes: c.PersistentVolumes, PersistentVolumeClaims: c.PersistentVolumeClaims, StorageClasses: c.StorageClasses}
	for _, np := range c.NodePools {
		if np.Name == pool {
			in.NodePools = append(in.NodePools, np)
		}
	}
	var keptClaims []karpv1.NodeClaim
	for _, nc := range c.NodeClaims {
		if kept[nc.Status.NodeName] {
			in.NodeClaims = append(in.NodeClaims, nc)
			in.Nodes = append(in.Nodes, poolNode[nc.Status.NodeName])
			keptClaims = append(keptClaims, *nc)
		}
	}
	for _, p := range c.Pods {
		if poolNode[p.Spec.NodeName] == nil || snapshot.OwnedByDaemonSet(p) || snapshot.Finished(p) || p.DeletionTimestamp != nil {
			continue
		}
		if kept[p.Spec.NodeName] {
			in.Pods = append(in.Pods, p)
			continue
		}
		fresh := p.DeepCopy()
		fresh.Spec.NodeName, fresh.Status = "", corev1.PodStatus{}
		in.Pods = append(in.Pods, fresh)
	}
	res := scheduler.Solve(in.Input(cat, snapshot.Offline))
	if len(res.Unschedulable) > 0 {
		t.Fatalf("plan cannot place %s: %s", res.Unschedulable[0].Pod.Name, res.Unschedulable[0].Reason)
	}
	price := fleetPrice(cat, keptClaims)
	how := []string{fmt.Sprintf("%d kept node(s) $%.4f/h", len(keptClaims), price)}
	for _, nc := range res.NewNodeClaims {
		it, o := nc.Cheapest()
		price += o.Price
		how = append(how, fmt.Sprintf("new %s %s %s $%.4f/h", it.Name, o.Zone, o.CapacityType, o.Price))
	}
	return price, strings.Join(how, " + ")
}
