package armemulator

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// withKubeletFlags is testCustomData with KUBELET_FLAGS replaced.
func withKubeletFlags(t *testing.T, flags string) string {
	t.Helper()
	raw, _ := base64.StdEncoding.DecodeString(testCustomData(t, nil))
	lines := strings.Split(string(raw), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "KUBELET_FLAGS=") {
			lines[i] = "KUBELET_FLAGS=\"" + flags + "\""
		}
	}
	return base64.StdEncoding.EncodeToString([]byte(strings.Join(lines, "\n")))
}

// The Node's allocatable is its capacity less what the kubelet's flags
// reserve, as the kubelet computes it, whatever the size's capacity came
// from.
func TestKubeletAllocatableFromItsFlags(t *testing.T) {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("129886128Ki")}
	s := &Server{opts: Options{NodeResources: func(string, int32) (corev1.ResourceList, string, bool) {
		return capacity.DeepCopy(), "amd64", true
	}}, nics: map[string]*nicState{}}
	const base = "--kubeconfig=/var/lib/kubelet/kubeconfig --max-pods=110 "
	for _, tc := range []struct {
		name, flags                string
		cpu, memory, storage, pods string
	}{
		{"AKS's reservations", base + "--kube-reserved=cpu=140m,memory=2250Mi --system-reserved=cpu=0,memory=0 " +
			"--eviction-hard=memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%",
			// 129886128Ki less 10% as the kubelet computes it: what a real
			// AKS node with this disk reports.
			"3860m", "14034Mi", "119703055367", "110"},
		{"system-reserved counts too", base + "--kube-reserved=cpu=140m,memory=2250Mi --system-reserved=cpu=60m,memory=50Mi,ephemeral-storage=1Gi " +
			"--eviction-hard=memory.available<100Mi",
			"3800m", "13984Mi", "129886128Ki-1Gi", "110"},
		{"no flags: the kubelet's default eviction thresholds", base, "4", "16284Mi", "119703055367", "110"},
		{"0% sets no threshold", base + "--kube-reserved=cpu=1,memory=1Gi --eviction-hard=memory.available<0%,nodefs.available<0%",
			"3", "15Gi", "129886128Ki", "110"},
		// 5% parsed as a float32 is 0.0500000007: 858993472 bytes of 16Gi.
		{"a percentage of memory", base + "--eviction-hard=memory.available<5%", "4", "16320875712", "129886128Ki", "110"},
		{"reserved beyond capacity is 0", base + "--kube-reserved=cpu=5,memory=17Gi", "0", "0", "119703055367", "110"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := s.kubeletFor(mkBootedVM("Standard_D4s_v5", withKubeletFlags(t, tc.flags)))
			if err != nil {
				t.Fatal(err)
			}
			got := k.node.Status.Allocatable
			for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: tc.cpu, corev1.ResourceMemory: tc.memory,
				corev1.ResourceEphemeralStorage: tc.storage, corev1.ResourcePods: tc.pods} {
				wantQ := quantityExpr(t, want)
				if q := got[name]; q.Cmp(wantQ) != 0 {
					t.Errorf("allocatable %s = %s, want %s", name, q.String(), wantQ.String())
				}
			}
			if q := k.node.Status.Capacity[corev1.ResourceMemory]; q.Cmp(capacity[corev1.ResourceMemory]) != 0 {
				t.Errorf("capacity memory = %s, want the size's %s", q.String(), capacity.Memory().String())
			}
		})
	}
}

// quantityExpr reads "a" or "a-b".
func quantityExpr(t *testing.T, s string) resource.Quantity {
	t.Helper()
	a, b, minus := strings.Cut(s, "-")
	q := resource.MustParse(a)
	if minus {
		q.Sub(resource.MustParse(b))
	}
	return q
}

func TestKubeletRefusesBadReservations(t *testing.T) {
	const base = "--kubeconfig=/var/lib/kubelet/kubeconfig "
	for _, tc := range []struct{ name, flags, want string }{
		{"unknown reserved resource", base + "--kube-reserved=gpu=1", "--kube-reserved entry \"gpu=1\""},
		{"negative reservation", base + "--system-reserved=memory=-1Gi", "--system-reserved entry"},
		{"not a quantity", base + "--kube-reserved=cpu=lots", "--kube-reserved entry"},
		{"wrong operator", base + "--eviction-hard=memory.available>1Gi", "--eviction-hard entry"},
		{"unknown signal", base + "--eviction-hard=memory.free<1Gi", "--eviction-hard entry"},
		{"zero quantity", base + "--eviction-hard=memory.available<0", "positive quantity"},
		{"percentage over 100", base + "--eviction-hard=nodefs.available<120%", "percentage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := provision(withKubeletFlags(t, tc.flags))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("provision = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func mkBootedVM(size, customData string) *vmState {
	vm := vmBody("", customData)
	vm.Name = ptr("vm-1")
	vm.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes(size))
	return &vmState{vm: vm, sub: sub, rg: rg, location: loc, zone: "eastus-1"}
}
