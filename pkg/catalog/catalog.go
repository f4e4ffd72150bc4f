// Package catalog is the set of Azure VM sizes karpfunc can launch as AKS
// Linux nodes: capacity, AKS's reservations, well-known labels and priced
// offerings per zone and capacity type. The default catalog is embedded
// (built by internal/gen from public facts); users can load their own file.
package catalog

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog/internal/compact"
)

// Catalog is every instance type offered in one region.
type Catalog struct {
	Region string
	// Zones are topology.kubernetes.io/zone values (<region>-<n>); empty in
	// regions without availability zones, whose offerings have zone "".
	Zones         []string
	InstanceTypes []*InstanceType
}

// InstanceType is one VM size as a node would see it.
type InstanceType struct {
	Name         string
	Architecture string // "amd64" | "arm64"
	// HyperVGenerations are the VM generations the size boots, as Azure
	// writes them: "V1", "V2" or both, sorted. They decide which node
	// image the size can boot (package nodeimage).
	HyperVGenerations []string
	// Capacity is what the node reports: cpu, memory (after VM overhead),
	// pods (maxPods), ephemeral-storage (OS disk) and GPUs.
	Capacity corev1.ResourceList
	// Overhead is what the kubelet keeps from pods: kube-reserved,
	// system-reserved (none on AKS) and the hard eviction thresholds, from
	// the same Reservations its flags are written from (see Reservations).
	Overhead  corev1.ResourceList
	Labels    map[string]string
	Offerings []Offering
	// LocalDisks decide the ephemeral OS disk (EphemeralOSDiskPlacement);
	// nil when the catalog does not know them.
	LocalDisks *LocalDisks
	// EncryptionAtHostSupported is the size's EncryptionAtHostSupported
	// capability; nil when the catalog does not know it.
	EncryptionAtHostSupported *bool

	// What the reservations are computed from; fixedOverhead means a catalog
	// file stated Overhead, which WithMaxPods then keeps.
	vcpus, memoryMiB int64
	fixedOverhead    bool
}

// Offering is one way to buy an instance type.
type Offering struct {
	Zone         string
	CapacityType string // karpv1.CapacityTypeSpot or karpv1.CapacityTypeOnDemand
	Price        float64
	Available    bool
}

// Get finds an instance type by name.
func (c *Catalog) Get(name string) (*InstanceType, bool) {
	for _, it := range c.InstanceTypes {
		if it.Name == name {
			return it, true
		}
	}
	return nil, false
}

// Reservations are the kubelet reservations a node of this type is started
// with, the ones Overhead was computed from. An overhead a catalog file
// stated is kept as kube-reserved with no hard eviction thresholds, so the
// kubelet keeps exactly it; it may name cpu, memory and ephemeral-storage,
// the resources a kubelet reserves.
func (it *InstanceType) Reservations() (Reservations, error) {
	if !it.fixedOverhead {
		pods := it.Capacity[corev1.ResourcePods]
		return KubeletReservations(it.vcpus, it.memoryMiB, int32(pods.Value())), nil
	}
	kube := corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{}, corev1.ResourceMemory: resource.Quantity{}}
	for name, q := range it.Overhead {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			kube[name] = q.DeepCopy()
		default:
			return Reservations{}, fmt.Errorf("instance type %s: the catalog file's overhead names %s, which a kubelet cannot reserve "+
				"(it reserves cpu, memory and ephemeral-storage): remove it from the overhead", it.Name, name)
		}
	}
	return Reservations{KubeReserved: kube, SystemReserved: corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{}, corev1.ResourceMemory: resource.Quantity{}}}, nil
}

// Allocatable is capacity minus overhead: what pods can request.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	return resources.Subtract(it.Capacity, it.Overhead)
}

// WithMaxPods returns a copy whose pods capacity is n, with AKS's memory
// reservation recomputed for n (it grows with maxPods; see
// KubeletReservations). A catalog file's explicit overhead is kept as written.
func (it *InstanceType) WithMaxPods(n int32) *InstanceType {
	out := *it
	out.Capacity = it.Capacity.DeepCopy()
	if out.Capacity == nil {
		out.Capacity = corev1.ResourceList{}
	}
	out.Capacity[corev1.ResourcePods] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	if it.fixedOverhead {
		out.Overhead = it.Overhead.DeepCopy()
	} else {
		out.Overhead = KubeletReservations(it.vcpus, it.memoryMiB, n).Overhead(out.Capacity)
	}
	return &out
}

// Requirements describe every node this instance type can become: its labels,
// plus the zones and capacity types of its available offerings. SKU labels it
// lacks are DoesNotExist so pods asking for them are kept off it.
func (it *InstanceType) Requirements() scheduling.Requirements {
	reqs := scheduling.NewRequirements()
	for key, value := range it.Labels {
		reqs.Add(scheduling.NewRequirement(key, corev1.NodeSelectorOpIn, value))
	}
	for _, key := range SKULabels {
		if _, ok := it.Labels[key]; !ok {
			reqs.Add(scheduling.NewRequirement(key, corev1.NodeSelectorOpDoesNotExist))
		}
	}
	var zones, capacityTypes []string
	for _, offering := range it.Offerings {
		if offering.Available {
			zones = append(zones, offering.Zone)
			capacityTypes = append(capacityTypes, offering.CapacityType)
		}
	}
	reqs.Add(scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...))
	reqs.Add(scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, capacityTypes...))
	return reqs
}

//go:embed data/catalog.json.gz
var embedded []byte

var loadEmbedded = sync.OnceValues(func() (*compact.File, error) {
	zr, err := gzip.NewReader(bytes.NewReader(embedded))
	if err != nil {
		return nil, fmt.Errorf("embedded catalog is corrupt (rerun go generate ./pkg/catalog): %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("embedded catalog is corrupt (rerun go generate ./pkg/catalog): %w", err)
	}
	compactFile := &compact.File{}
	if err := json.Unmarshal(raw, compactFile); err != nil {
		return nil, fmt.Errorf("embedded catalog is corrupt (rerun go generate ./pkg/catalog): %w", err)
	}
	return compactFile, nil
})

// Regions lists the regions of the embedded catalog, sorted.
func Regions() []string {
	compactFile, err := loadEmbedded()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(compactFile.Regions))
	for name := range compactFile.Regions {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Default is the embedded catalog for an ARM region (e.g. "eastus"), with
// pods capacity v1beta1.DefaultMaxPods. Each call returns fresh objects.
//
// Zones: zonal regions offer every SKU in zones 1..3 unless the public zone
// facts list other zones for it (a few observed SKUs); regions without
// availability zones have one non-zonal offering per capacity type (zone "",
// as the Azure provider models them). Spot is offered only where a spot
// price exists. Zone restrictions recorded for a particular subscription are
// ignored: they are not a property of the region.
func Default(region string) (*Catalog, error) {
	compactFile, err := loadEmbedded()
	if err != nil {
		return nil, err
	}
	regionFacts, ok := compactFile.Regions[region]
	if !ok {
		known := Regions()
		suggestions := []string{"eastus", "westeurope", "southeastasia"}
		suggestions = slices.DeleteFunc(suggestions, func(s string) bool { return !slices.Contains(known, s) })
		return nil, NewUnknownRegionError(region, suggestions)
	}
	cat := &Catalog{Region: region}
	defaultZones := []string{""}
	if regionFacts.Zonal {
		defaultZones = []string{region + "-1", region + "-2", region + "-3"}
		cat.Zones = slices.Clone(defaultZones)
	}
	for _, sku := range compactFile.SKUs {
		price, ok := regionFacts.Prices[sku.Name]
		if !ok {
			continue
		}
		zones := defaultZones
		if listed, ok := regionFacts.Zones[sku.Name]; ok {
			zones = make([]string, len(listed))
			for i, number := range listed {
				zones[i] = region + "-" + number
			}
		}
		var offerings []Offering
		for _, zone := range zones {
			offerings = append(offerings, Offering{Zone: zone, CapacityType: karpv1.CapacityTypeOnDemand, Price: price[0], Available: true})
			if len(price) > 1 {
				offerings = append(offerings, Offering{Zone: zone, CapacityType: karpv1.CapacityTypeSpot, Price: price[1], Available: true})
			}
		}
		cat.InstanceTypes = append(cat.InstanceTypes, newInstanceType(sku, region, offerings))
	}
	return cat, nil
}

func newInstanceType(s compact.SKU, region string, offerings []Offering) *InstanceType {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(s.VCPUs, resource.DecimalSI),
		corev1.ResourceMemory:           NodeMemory(s.MemoryMiB),
		corev1.ResourcePods:             *resource.NewQuantity(int64(v1beta1.DefaultMaxPods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewScaledQuantity(int64(v1beta1.DefaultOSDiskSizeGB), resource.Giga),
	}
	switch s.GPUManufacturer {
	case "nvidia":
		capacity[ResourceNvidiaGPU] = *resource.NewQuantity(s.GPUCount, resource.DecimalSI)
	case "amd":
		capacity[ResourceAMDGPU] = *resource.NewQuantity(s.GPUCount, resource.DecimalSI)
	}
	it := &InstanceType{
		Name:              s.Name,
		Architecture:      s.Architecture,
		HyperVGenerations: slices.Clone(s.HyperVGenerations),
		Capacity:          capacity,
		Overhead:          KubeletReservations(s.VCPUs, s.MemoryMiB, v1beta1.DefaultMaxPods).Overhead(capacity),
		Labels: deriveLabels(skuFacts{
			name: s.Name, architecture: s.Architecture, vcpus: s.VCPUs, memoryMiB: s.MemoryMiB,
			gpuCount: s.GPUCount, gpuName: s.GPUName, gpuManufacturer: s.GPUManufacturer,
			acceleratedNetworking: s.AcceleratedNetworking, premium: s.PremiumIO, region: region,
		}),
		Offerings: offerings,
		vcpus:     s.VCPUs,
		memoryMiB: s.MemoryMiB,
	}
	it.LocalDisks = localDisksOf(s.LocalDisks)
	addEphemeralOSLabel(it.Labels, it.LocalDisks)
	return it
}
