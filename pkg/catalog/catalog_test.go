package catalog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

func TestKubeReservedCPU(t *testing.T) {
	// AKS's published table: https://learn.microsoft.com/azure/aks/node-resource-reservations
	for _, tc := range []struct {
		vcpus int64
		want  string
	}{{1, "60m"}, {2, "100m"}, {3, "120m"}, {4, "140m"}, {8, "180m"}, {16, "260m"}, {32, "420m"}, {64, "740m"}} {
		got := catalog.KubeReservedCPU(tc.vcpus)
		if got.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("KubeReservedCPU(%d) = %s, want %s", tc.vcpus, got.String(), tc.want)
		}
	}
}

func TestKubeReservedMemory(t *testing.T) {
	// AKS from 1.29: min(20Mi x maxPods + 50Mi, 25% of the VM's memory)
	// (https://learn.microsoft.com/azure/aks/node-resource-reservations).
	for _, tc := range []struct {
		name      string
		memoryMiB int64
		maxPods   int32
		want      string
	}{
		{"8GiB 30 pods (AKS doc example: 650 MB)", 8 * 1024, 30, "650Mi"},
		{"4GiB 70 pods (AKS doc example: capped at 25%)", 4 * 1024, 70, "1024Mi"},
		{"7GiB 110 pods", 7 * 1024, 110, "1792Mi"},
		{"16GiB 250 pods: 25% cap", 16 * 1024, 250, "4096Mi"},
		{"64GiB 250 pods", 64 * 1024, 250, "5050Mi"},
		{"256GiB 250 pods", 256 * 1024, 250, "5050Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := catalog.KubeReservedMemory(tc.memoryMiB, tc.maxPods); got.Cmp(resource.MustParse(tc.want)) != 0 {
				t.Errorf("kube-reserved memory = %s, want %s", got.String(), tc.want)
			}
		})
	}
}

func TestReservationsOverheadAndFlags(t *testing.T) {
	// A real AKS 1.29 node, 2 vCPUs and 30 max pods, reported ephemeral-storage
	// capacity 129886128Ki and allocatable 119703055367: nodefs.available<10%
	// taken as the kubelet computes it (float32 percentage).
	storage := resource.MustParse("129886128Ki")
	for _, tc := range []struct {
		name                               string
		vcpus, memoryMiB                   int64
		maxPods                            int32
		wantCPU, wantMem, wantKubeReserved string
	}{
		{"2 vCPU 7GiB 30 pods", 2, 7 * 1024, 30, "100m", "750Mi", "cpu=100m,memory=650Mi"},
		{"4 vCPU 16GiB 250 pods", 4, 16384, 250, "140m", "4196Mi", "cpu=140m,memory=4096Mi"},
		{"64 vCPU 256GiB 250 pods", 64, 256 * 1024, 250, "740m", "5150Mi", "cpu=740m,memory=5050Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := catalog.KubeletReservations(tc.vcpus, tc.memoryMiB, tc.maxPods)
			got := r.Overhead(corev1.ResourceList{corev1.ResourceEphemeralStorage: storage})
			if q := got[corev1.ResourceCPU]; q.Cmp(resource.MustParse(tc.wantCPU)) != 0 {
				t.Errorf("cpu = %s, want %s", q.String(), tc.wantCPU)
			}
			if q := got[corev1.ResourceMemory]; q.Cmp(resource.MustParse(tc.wantMem)) != 0 {
				t.Errorf("memory = %s, want %s", q.String(), tc.wantMem)
			}
			allocatable := storage.DeepCopy()
			allocatable.Sub(got[corev1.ResourceEphemeralStorage])
			if allocatable.Value() != 119703055367 {
				t.Errorf("ephemeral-storage allocatable = %d, want 119703055367", allocatable.Value())
			}
			flags := r.KubeletFlags()
			want := map[string]string{"--kube-reserved": tc.wantKubeReserved, "--system-reserved": "cpu=0,memory=0",
				"--eviction-hard": "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%"}
			for name, value := range want {
				if flags[name] != value {
					t.Errorf("%s = %q, want %q", name, flags[name], value)
				}
			}
		})
	}
}

func TestNodeMemorySubtractsVMOverhead(t *testing.T) {
	got := catalog.NodeMemory(16384)
	// 16 GiB - ceil(7.5% of 16 GiB in bytes)
	if want := int64(17179869184 - 1288490189); got.Value() != want {
		t.Errorf("NodeMemory(16GiB) = %d, want %d", got.Value(), want)
	}
}

func TestParseSizeName(t *testing.T) {
	for _, tc := range []struct {
		name                                              string
		ok                                                bool
		family, series, version, accelerator, vcpus, feat string
	}{
		{"Standard_D4s_v5", true, "D", "Ds_v5", "5", "", "4", "s"},
		{"Standard_NC24ads_A100_v4", true, "N", "NCads_v4", "4", "A100", "24", "ads"},
		{"Standard_E2ps_v6", true, "E", "Eps_v6", "6", "", "2", "ps"},
		{"Standard_B2ms", true, "B", "Bms", "1", "", "2", "ms"},
		{"Standard_DS2_v2", true, "D", "DS_v2", "2", "", "2", ""},
		{"Standard_NC36ds_xl_RTXPRO6000BSE_v6", true, "N", "NCds_v6", "6", "RTXPRO6000BSE", "36", "ds"},
		{"Standard_M416s_8_v2", true, "M", "Ms_v2", "2", "", "416", "s"},
		{"big-box", false, "", "", "", "", "", ""},
		{"Standard_", false, "", "", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := catalog.ParseSizeName(tc.name)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			got := []string{s.Family, s.Series(), s.Version, s.Accelerator, s.VCPUs, s.Features}
			want := []string{tc.family, tc.series, tc.version, tc.accelerator, tc.vcpus, tc.feat}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func mustDefault(t testing.TB, region string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Default(region)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDefaultEastUS(t *testing.T) {
	c := mustDefault(t, "eastus")
	if n := len(c.InstanceTypes); n < 500 || n > 1200 {
		t.Errorf("eastus has %d instance types, want a few hundred", n)
	}
	if strings.Join(c.Zones, ",") != "eastus-1,eastus-2,eastus-3" {
		t.Errorf("zones = %v", c.Zones)
	}
	zones := map[string]bool{}
	for _, z := range c.Zones {
		zones[z] = true
	}
	for _, it := range c.InstanceTypes {
		vcpus := it.Capacity[corev1.ResourceCPU]
		switch {
		case vcpus.Value() < 2:
			t.Errorf("%s has %d vCPUs; AKS needs 2", it.Name, vcpus.Value())
		case strings.HasSuffix(it.Name, "_Promo"), strings.Contains(it.Name, "-"),
			strings.HasPrefix(it.Name, "Standard_DC"), strings.HasPrefix(it.Name, "Standard_EC"), !strings.HasPrefix(it.Name, "Standard_"):
			t.Errorf("%s should have been excluded", it.Name)
		case len(it.Offerings) == 0:
			t.Errorf("%s has no offerings", it.Name)
		}
		for _, o := range it.Offerings {
			if !zones[o.Zone] || o.Price <= 0 {
				t.Errorf("%s offering %+v: zone not in catalog or price not positive", it.Name, o)
			}
		}
		alloc := it.Allocatable()
		if q := alloc[corev1.ResourceMemory]; q.Sign() <= 0 {
			t.Errorf("%s allocatable memory %s", it.Name, q.String())
		}
	}

	d4, ok := c.Get("Standard_D4s_v5")
	if !ok {
		t.Fatal("Standard_D4s_v5 missing from eastus")
	}
	var od, spot float64
	for _, o := range d4.Offerings {
		if o.Zone == "eastus-1" && o.CapacityType == karpv1.CapacityTypeOnDemand {
			od = o.Price
		}
		if o.Zone == "eastus-1" && o.CapacityType == karpv1.CapacityTypeSpot {
			spot = o.Price
		}
	}
	if od < 0.1 || od > 0.3 {
		t.Errorf("D4s_v5 on-demand = %v USD/h, want about 0.19", od)
	}
	if spot <= 0 || spot >= od {
		t.Errorf("D4s_v5 spot = %v, want cheaper than on-demand %v", spot, od)
	}
	alloc := d4.Allocatable()
	if q := alloc[corev1.ResourceCPU]; q.Cmp(resource.MustParse("3860m")) != 0 {
		t.Errorf("D4s_v5 allocatable cpu = %s, want 3860m", q.String())
	}
	if q := alloc[corev1.ResourcePods]; q.Value() != 250 {
		t.Errorf("D4s_v5 pods = %d, want 250", q.Value())
	}
	// 16GiB less 7.5% VM overhead, less 4196Mi (per-pod formula at 250 pods).
	if q := alloc[corev1.ResourceMemory]; q.Value() != 17179869184-1288490189-4196<<20 {
		t.Errorf("D4s_v5 allocatable memory = %d", q.Value())
	}
}

func TestDefaultNonZonalAndUnknownRegions(t *testing.T) {
	c := mustDefault(t, "westcentralus")
	if len(c.Zones) != 0 {
		t.Errorf("westcentralus zones = %v, want none", c.Zones)
	}
	if o := c.InstanceTypes[0].Offerings[0]; o.Zone != "" {
		t.Errorf("non-zonal offering zone = %q, want \"\"", o.Zone)
	}
	_, err := catalog.Default("mars-1")
	if !catalog.IsUnknownRegion(err) || !strings.Contains(err.Error(), "eastus") {
		t.Errorf("Default(mars-1) error = %v, want UnknownRegionError naming eastus", err)
	}
}

func TestLabels(t *testing.T) {
	c := mustDefault(t, "eastus")
	for _, tc := range []struct {
		name     string
		want     map[string]string
		absent   []string
		resource corev1.ResourceName
		count    int64
	}{
		{name: "Standard_D4s_v5", want: map[string]string{
			catalog.LabelSKUFamily: "D", catalog.LabelSKUSeries: "Ds_v5", catalog.LabelSKUVersion: "5",
			catalog.LabelSKUCPU: "4", catalog.LabelSKUMemory: "16384", catalog.LabelSKUGPUCount: "0",
			catalog.LabelSKUAcceleratedNetworking: "true", catalog.LabelSKUStoragePremiumCapable: "true",
			corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelInstanceTypeStable: "Standard_D4s_v5",
			catalog.LabelSKUName: "Standard_D4s_v5",
		}, absent: []string{catalog.LabelSKUGPUName, catalog.LabelSKUGPUManufacturer}},
		{name: "Standard_NC24ads_A100_v4", want: map[string]string{
			catalog.LabelSKUFamily: "N", catalog.LabelSKUSeries: "NCads_v4", catalog.LabelSKUVersion: "4",
			catalog.LabelSKUGPUName: "A100", catalog.LabelSKUGPUManufacturer: "nvidia", catalog.LabelSKUGPUCount: "1",
		}, resource: catalog.ResourceNvidiaGPU, count: 1},
		{name: "Standard_E2ps_v6", want: map[string]string{
			catalog.LabelSKUFamily: "E", catalog.LabelSKUSeries: "Eps_v6", catalog.LabelSKUVersion: "6",
			corev1.LabelArchStable: "arm64", catalog.LabelSKUMemory: "16384",
		}},
		{name: "Standard_B2ms", want: map[string]string{
			catalog.LabelSKUFamily: "B", catalog.LabelSKUSeries: "Bms", catalog.LabelSKUVersion: "1",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := c.Get(tc.name)
			if !ok {
				t.Fatalf("%s not in eastus", tc.name)
			}
			for k, v := range tc.want {
				if it.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, it.Labels[k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := it.Labels[k]; ok {
					t.Errorf("label %s should be absent", k)
				}
			}
			if tc.resource != "" {
				if q := it.Capacity[tc.resource]; q.Value() != tc.count {
					t.Errorf("%s capacity = %s, want %d", tc.resource, q.String(), tc.count)
				}
			}
		})
	}
}

func TestWithMaxPods(t *testing.T) {
	d4, _ := mustDefault(t, "eastus").Get("Standard_D4s_v5")
	for _, tc := range []struct {
		maxPods int32
		wantMem string
	}{{30, "750Mi"}, {110, "2350Mi"}, {200, "4150Mi"}, {250, "4196Mi"}} {
		got := d4.WithMaxPods(tc.maxPods)
		if q := got.Capacity[corev1.ResourcePods]; q.Value() != int64(tc.maxPods) {
			t.Errorf("WithMaxPods(%d) pods = %d", tc.maxPods, q.Value())
		}
		if q := got.Overhead[corev1.ResourceMemory]; q.Cmp(resource.MustParse(tc.wantMem)) != 0 {
			t.Errorf("WithMaxPods(%d) memory overhead = %s, want %s", tc.maxPods, q.String(), tc.wantMem)
		}
	}
	if q := d4.Capacity[corev1.ResourcePods]; q.Value() != 250 {
		t.Errorf("WithMaxPods changed the original: pods = %d", q.Value())
	}
}

func TestRequirements(t *testing.T) {
	c := mustDefault(t, "eastus")
	d4, _ := c.Get("Standard_D4s_v5")
	a100, _ := c.Get("Standard_NC24ads_A100_v4")
	for _, tc := range []struct {
		name string
		it   *catalog.InstanceType
		pod  scheduling.Requirements
		want bool
	}{
		{"zone", d4, scheduling.NewRequirements(scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "eastus-2")), true},
		{"other region's zone", d4, scheduling.NewRequirements(scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "westus2-1")), false},
		{"spot", d4, scheduling.NewRequirements(scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot)), true},
		{"gpu name on a CPU size", d4, scheduling.NewRequirements(scheduling.NewRequirement(catalog.LabelSKUGPUName, corev1.NodeSelectorOpIn, "A100")), false},
		{"gpu name on A100", a100, scheduling.NewRequirements(scheduling.NewRequirement(catalog.LabelSKUGPUName, corev1.NodeSelectorOpIn, "A100")), true},
		{"cpu Gt 8", d4, scheduling.NewRequirements(scheduling.NewRequirement(catalog.LabelSKUCPU, corev1.NodeSelectorOpGt, "8")), false},
		{"cpu Lt 8", d4, scheduling.NewRequirements(scheduling.NewRequirement(catalog.LabelSKUCPU, corev1.NodeSelectorOpLt, "8")), true},
		{"family NotIn D", d4, scheduling.NewRequirements(scheduling.NewRequirement(catalog.LabelSKUFamily, corev1.NodeSelectorOpNotIn, "D")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.it.Requirements().Intersects(tc.pod) == nil; got != tc.want {
				t.Errorf("intersects = %v, want %v", got, tc.want)
			}
		})
	}
}

const goodFile = `{"region":"eastus","zones":["eastus-1","eastus-2","eastus-3"],
 "instanceTypes":[
  {"name":"Standard_D4s_v5","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"110"},
   "overhead":{"cpu":"140m","memory":"2662Mi"},"labels":{"team":"a"},
   "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.192,"available":true},
                {"zone":"eastus-2","capacityType":"spot","price":0.05,"available":false}]},
  {"name":"tiny","architecture":"arm64","capacity":{"cpu":"2","memory":"8Gi"},
   "offerings":[{"zone":"eastus-3","capacityType":"spot","price":0.01}]},
  {"name":"free-overhead","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"overhead":{},
   "offerings":[{"zone":"eastus-3","capacityType":"spot","price":0.01}]}]}`

func TestLoadGoodFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(goodFile), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d4, _ := c.Get("Standard_D4s_v5")
	alloc := d4.Allocatable()
	if q := alloc[corev1.ResourceMemory]; q.Cmp(resource.MustParse("13722Mi")) != 0 {
		t.Errorf("given overhead: allocatable memory = %s, want 16Gi-2662Mi", q.String())
	}
	if d4.Labels["team"] != "a" || d4.Labels[catalog.LabelSKUSeries] != "Ds_v5" {
		t.Errorf("labels = %v", d4.Labels)
	}
	if d4.Offerings[1].Available {
		t.Error("available:false was ignored")
	}
	if q := d4.WithMaxPods(250).Overhead[corev1.ResourceMemory]; q.Cmp(resource.MustParse("2662Mi")) != 0 {
		t.Errorf("WithMaxPods must keep a file's overhead, got %s", q.String())
	}
	tiny, _ := c.Get("tiny")
	if q := tiny.Capacity[corev1.ResourcePods]; q.Value() != 250 {
		t.Errorf("default pods = %d, want 250", q.Value())
	}
	if q := tiny.Overhead[corev1.ResourceCPU]; q.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("computed overhead cpu = %s, want 100m", q.String())
	}
	if !tiny.Offerings[0].Available {
		t.Error("available should default to true")
	}
	free, _ := c.Get("free-overhead")
	if len(free.Overhead) != 0 {
		t.Errorf("overhead {} must be used as given, got %v", free.Overhead)
	}
}

func TestParseBadFiles(t *testing.T) {
	it := func(fields string) string {
		return `{"region":"eastus","zones":["eastus-1"],"instanceTypes":[{"name":"ok","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"spot","price":1}]},` + fields + `]}`
	}
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"not json", `{`, []string{"not a catalog file"}},
		{"unknown field", `{"region":"eastus","zonez":[]}`, []string{"zonez"}},
		{"no region", `{"instanceTypes":[]}`, []string{"region", "is required"}},
		{"bad zone", `{"region":"eastus","zones":["westus-1"],"instanceTypes":[]}`, []string{"zones[0]", "westus-1"}},
		{"no types", `{"region":"eastus"}`, []string{"instanceTypes", "empty"}},
		{"bad arch", it(`{"name":"x","architecture":"x64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[]}`), []string{"instanceTypes[1] (x).architecture", "amd64"}},
		{"bad quantity", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"two","memory":"8Gi"},"offerings":[]}`), []string{"instanceTypes[1] (x).capacity.cpu", "two"}},
		{"missing memory", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2"},"offerings":[]}`), []string{"instanceTypes[1] (x).capacity.memory", "required"}},
		{"negative overhead", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"overhead":{"cpu":"-1"},"offerings":[]}`), []string{"(x).overhead.cpu", "negative"}},
		{"no offerings", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[]}`), []string{"(x).offerings", "empty"}},
		{"unknown zone", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-9","capacityType":"spot","price":1}]}`), []string{"(x).offerings[0].zone", "eastus-9"}},
		{"bad capacity type", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"reserved","price":1}]}`), []string{"(x).offerings[0].capacityType", "reserved"}},
		{"missing price", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"spot"}]}`), []string{"(x).offerings[0].price", "required"}},
		{"negative price", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"spot","price":-1}]}`), []string{"(x).offerings[0].price"}},
		{"duplicate", it(`{"name":"ok","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[]}`), []string{"instanceTypes[1] (ok).name", "instanceTypes[0]"}},
		{"missing name", it(`{"architecture":"amd64"}`), []string{"instanceTypes[1].name", "required"}},
		{"empty generations", it(`{"name":"x","architecture":"amd64","hyperVGenerations":[],"capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"spot","price":1}]}`), []string{"(x).hyperVGenerations", "is empty"}},
		{"unknown generation", it(`{"name":"x","architecture":"amd64","hyperVGenerations":["V2","Gen3"],"capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"spot","price":1}]}`), []string{"(x).hyperVGenerations[1]", `"Gen3"`}},
		{"conflicting label", it(`{"name":"x","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"labels":{"kubernetes.io/arch":"arm64"},"offerings":[{"zone":"eastus-1","capacityType":"spot","price":1}]}`), []string{"(x).labels.kubernetes.io/arch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.Parse([]byte(tc.data))
			if !catalog.IsInvalidCatalog(err) {
				t.Fatalf("err = %v, want InvalidCatalogError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestHyperVGenerations: the embedded catalog carries each size's
// generations from the public facts; a catalog file may state them and
// otherwise means Gen2.
func TestHyperVGenerations(t *testing.T) {
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"Standard_D2_v3": "V1", "Standard_F2": "V1", "Standard_D4s_v5": "V1,V2", "Standard_D2ps_v5": "V2",
	} {
		it, ok := c.Get(name)
		if !ok {
			t.Fatalf("%s not in the eastus catalog", name)
		}
		if got := strings.Join(it.HyperVGenerations, ","); got != want {
			t.Errorf("%s generations = %s, want %s", name, got, want)
		}
	}
	for _, it := range c.InstanceTypes {
		if len(it.HyperVGenerations) == 0 {
			t.Fatalf("%s has no Hyper-V generation", it.Name)
		}
	}
	f, err := catalog.Parse([]byte(`{"region":"eastus","zones":["eastus-1"],"instanceTypes":[
	 {"name":"old","architecture":"amd64","hyperVGenerations":["V2","V1","V1"],"capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"spot","price":1}]},
	 {"name":"unsaid","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi"},"offerings":[{"zone":"eastus-1","capacityType":"spot","price":1}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.InstanceTypes[0].HyperVGenerations, ","); got != "V1,V2" {
		t.Errorf("stated generations = %s, want V1,V2 (sorted, once each)", got)
	}
	if got := strings.Join(f.InstanceTypes[1].HyperVGenerations, ","); got != "V2" {
		t.Errorf("default generations = %s, want V2", got)
	}
}

// A catalog file's capacity is after VM overhead; AKS's reservations are for
// the size's memory, which the sku-memory label records.
func TestFileReservationsUseTheSKUMemoryLabel(t *testing.T) {
	file := func(labels string) string {
		return `{"region":"eastus","zones":["eastus-1"],"instanceTypes":[{"name":"Standard_D4s_v5","architecture":"amd64",
			"capacity":{"cpu":"4","memory":"15155Mi","pods":"250"},"labels":{` + labels + `},
			"offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.192}]}]}`
	}
	for _, tc := range []struct{ name, labels, wantMemory string }{
		{"with the label: 25% of 16GiB + 100Mi", `"karpenter.azure.com/sku-memory":"16384"`, "4196Mi"},
		{"without: 25% of the capacity + 100Mi", ``, "3888Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := catalog.Parse([]byte(file(tc.labels)))
			if err != nil {
				t.Fatal(err)
			}
			if q := c.InstanceTypes[0].Overhead[corev1.ResourceMemory]; q.Cmp(resource.MustParse(tc.wantMemory)) != 0 {
				t.Errorf("memory overhead = %s, want %s", q.String(), tc.wantMemory)
			}
		})
	}
	if _, err := catalog.Parse([]byte(file(`"karpenter.azure.com/sku-memory":"lots"`))); err == nil || !strings.Contains(err.Error(), "sku-memory") {
		t.Errorf("a bad sku-memory label: err = %v, want one naming it", err)
	}
}
