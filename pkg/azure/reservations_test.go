package azure_test

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// TestKubeletFlagsAreTheEnginesOverhead renders every catalog size's node
// bootstrap, reads --kube-reserved, --system-reserved and --eviction-hard
// back out of KUBELET_FLAGS, and computes what the kubelet keeps from them
// (capacity - kube-reserved - system-reserved - hard eviction:
// https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable).
// That must be the overhead the engine subtracted for the size.
func TestKubeletFlagsAreTheEnginesOverhead(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	// A catalog file's stated overheads are kept by the kubelet too.
	stated, err := catalog.Parse([]byte(`{"region":"eastus","zones":["eastus-1"],"instanceTypes":[
		{"name":"Standard_A","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","ephemeral-storage":"100Gi"},
		 "overhead":{"cpu":"250m","memory":"1Gi","ephemeral-storage":"2Gi"},"offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":1}]},
		{"name":"Standard_B","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi"},
		 "overhead":{},"offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":1}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	base := testNode(t)
	base.Kubelet = nil
	for _, maxPods := range []int32{30, 110, 250} {
		for _, it := range append(cat.InstanceTypes, stated.InstanceTypes...) {
			sized := it.WithMaxPods(maxPods)
			reservations, err := sized.Reservations()
			if err != nil {
				t.Fatal(err)
			}
			nb := base
			nb.MaxPods, nb.Reservations = maxPods, &reservations
			flags := kubeletFlagsOf(t, nb)
			got, err := overheadFromFlags(flags, sized.Capacity)
			if err != nil {
				t.Fatalf("%s at %d pods: %v", it.Name, maxPods, err)
			}
			if !equalResources(got, sized.Overhead) {
				t.Fatalf("%s at %d pods: the kubelet keeps %s (flags %q, %q, %q), the engine subtracts %s", it.Name, maxPods, resources.String(got),
					flags["--kube-reserved"], flags["--system-reserved"], flags["--eviction-hard"], resources.String(sized.Overhead))
			}
		}
	}
}

func kubeletFlagsOf(t *testing.T, nb azure.NodeBootstrap) map[string]string {
	t.Helper()
	vars, err := nb.Variables()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		if v.Name == "KUBELET_FLAGS" {
			flags, err := azure.ParseKubeletFlags(v.Value)
			if err != nil {
				t.Fatal(err)
			}
			return flags
		}
	}
	t.Fatal("no KUBELET_FLAGS")
	return nil
}

// overheadFromFlags is what a kubelet started with flags keeps from pods.
func overheadFromFlags(flags map[string]string, capacity corev1.ResourceList) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	add := func(name corev1.ResourceName, q resource.Quantity) {
		sum := out[name]
		sum.Add(q)
		out[name] = sum
	}
	for _, flag := range []string{"--kube-reserved", "--system-reserved"} {
		for _, pair := range strings.Split(flags[flag], ",") {
			name, value, _ := strings.Cut(pair, "=")
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return nil, err
			}
			add(corev1.ResourceName(name), q)
		}
	}
	for _, threshold := range strings.Split(flags["--eviction-hard"], ",") {
		signal, value, _ := strings.Cut(threshold, "<")
		resourceName := map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage}[signal]
		if resourceName == "" {
			continue // inodes reserve nothing
		}
		if percent, ok := strings.CutSuffix(value, "%"); ok {
			p, err := strconv.ParseFloat(percent, 32)
			if err != nil {
				return nil, err
			}
			c := capacity[resourceName]
			add(resourceName, *resource.NewQuantity(int64(float64(c.Value())*float64(float32(p)/100)), resource.BinarySI))
			continue
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, err
		}
		add(resourceName, q)
	}
	return out, nil
}

func equalResources(a, b corev1.ResourceList) bool {
	for _, list := range []corev1.ResourceList{a, b} {
		for name := range list {
			qa, qb := a[name], b[name]
			if qa.Cmp(qb) != 0 {
				return false
			}
		}
	}
	return true
}
