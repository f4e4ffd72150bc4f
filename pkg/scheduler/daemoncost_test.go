package scheduler_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// cheapestSingleNode is the price and name of the cheapest available
// offering of c whose allocatable holds cpu millicores and mem bytes.
func cheapestSingleNode(c *catalog.Catalog, cpu, mem int64) (float64, string) {
	best, name := 0.0, ""
	for _, it := range c.InstanceTypes {
		alloc := it.Allocatable()
		if alloc.Cpu().MilliValue() < cpu || alloc.Memory().Value() < mem {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && (name == "" || o.Price < best) {
				best, name = o.Price, it.Name
			}
		}
	}
	return best, name
}

// TestSmallFleetTakesTheNodeThatHoldsAll: the type claims pack to is
// chosen with the DaemonSet overhead every new node carries and with
// whole nodes: a handful of pods that one larger node holds (daemon
// included) for less than the several small nodes the pods' LP mix would
// buy go on that one node. The pods are eastus's general-purpose sizes'
// workload of a few 1-2 vCPU pods and a 500m DaemonSet.
func TestSmallFleetTakesTheNodeThatHoldsAll(t *testing.T) {
	full, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	c := &catalog.Catalog{Region: full.Region, Zones: full.Zones,
		InstanceTypes: slices.DeleteFunc(slices.Clone(full.InstanceTypes), func(it *catalog.InstanceType) bool { return !generalPurposeType(it) })}
	for _, tc := range []struct {
		pods     int
		cpu, mem string
		cpuM     int64
		memMi    int64
	}{
		{pods: 5, cpu: "1", mem: "2Gi", cpuM: 1000, memMi: 2048},
		{pods: 6, cpu: "1", mem: "2Gi", cpuM: 1000, memMi: 2048},
		{pods: 5, cpu: "1", mem: "4Gi", cpuM: 1000, memMi: 4096},
		{pods: 5, cpu: "2", mem: "4Gi", cpuM: 2000, memMi: 4096},
		{pods: 5, cpu: "1500m", mem: "7475Mi", cpuM: 1500, memMi: 7475},
	} {
		t.Run(fmt.Sprintf("%dx%s-%s", tc.pods, tc.cpu, tc.mem), func(t *testing.T) {
			var ps []*corev1.Pod
			for i := range tc.pods {
				ps = append(ps, pod(fmt.Sprintf("p%d", i), tc.cpu, tc.mem))
			}
			in := genericInput(c, ps)
			in.DaemonSets = []*appsv1.DaemonSet{{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: pod("ds", "500m", "128Mi").Spec}}}}
			best, bestName := cheapestSingleNode(c, int64(tc.pods)*tc.cpuM+500, (int64(tc.pods)*tc.memMi+128)<<20)
			r := scheduler.Solve(in)
			if price := fleetPrice(t, in, r); price > best*1.0001 {
				var names []string
				for _, nc := range r.NewNodeClaims {
					it, _ := nc.Cheapest()
					names = append(names, fmt.Sprintf("%s (%d pods)", it.Name, len(nc.Pods)))
				}
				t.Errorf("fleet %v costs $%.4f/h; one %s holds every pod and the daemon for $%.4f/h", names, price, bestName, best)
			}
		})
	}
}
