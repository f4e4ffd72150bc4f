package differential

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

func objectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// runKarpfunc plans as `karpfunc plan` does: the objects as a cluster
// snapshot, its scheduler input under the offline pending rule, Solve.
func runKarpfunc(sc *scenario, cat *catalog.Catalog) *plan {
	sc = sc.deepCopy()
	cluster := snapshot.Cluster{
		Pods:        slices.Concat(sc.Bound, sc.Pods),
		Nodes:       sc.Nodes,
		NodeClaims:  sc.NodeClaims,
		NodePools:   sc.NodePools,
		NodeClasses: []*v1beta1.AKSNodeClass{{ObjectMeta: objectMeta("default")}},
		DaemonSets:  sc.DaemonSets,
	}
	res := scheduler.Solve(cluster.Input(cat, snapshot.Offline))
	out := &plan{Who: "karpfunc", OnExisting: map[string][]*corev1.Pod{}, Pending: map[string]string{}}
	for _, nc := range res.NewNodeClaims {
		var options []string
		for _, it := range nc.InstanceTypes {
			options = append(options, it.Name)
		}
		slices.Sort(options)
		out.addNew(cat, nc.NodePool.Name, options, nc.Requirements, nc.Pods)
	}
	for _, pl := range res.Existing {
		name := pl.Node
		if name == "" {
			name = pl.NodeClaim
		}
		out.OnExisting[name] = append(out.OnExisting[name], pl.Pods...)
	}
	for _, u := range res.Unschedulable {
		out.Pending[u.Pod.Name] = u.Reason
	}
	out.account(sc)
	return out
}

// poolByName finds a scenario's NodePool.
func (sc *scenario) poolByName(name string) *karpv1.NodePool {
	for _, np := range sc.NodePools {
		if np.Name == name {
			return np
		}
	}
	return nil
}
