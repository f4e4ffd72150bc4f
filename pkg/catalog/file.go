package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// The catalog file format: negotiated prices, a refreshed catalog, or a
// synthetic one for benchmarks. Example:
//
//	{"region":"eastus","zones":["eastus-1","eastus-2","eastus-3"],
//	 "instanceTypes":[{"name":"Standard_D4s_v5","architecture":"amd64",
//	   "capacity":{"cpu":"4","memory":"16Gi","pods":"110"},
//	   "overhead":{"cpu":"140m","memory":"2662Mi"},"labels":{},
//	   "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.192,"available":true}]}]}
//
// capacity is taken as the node will report it (cpu and memory required; pods
// defaults to 250). An absent overhead means "compute AKS's reservations"
// (from the karpenter.azure.com/sku-memory label, the size's memory in MiB,
// when present, else from capacity); a present one, even {}, is used as given
// and is what a node's kubelet is told to keep (kube-reserved, no hard
// eviction thresholds); it may name cpu, memory and ephemeral-storage. Labels are derived from
// the name and capacity as for the embedded catalog; labels in the file are
// added on top. available defaults to true. localDisks are the size's
// local-disk capabilities, which decide its ephemeral OS disk
// ({"ephemeralOSDiskSupported":true,"cachedDiskBytes":53687091200,
// "resourceDiskMiB":16384}; absent: a managed OS disk), and
// encryptionAtHostSupported its EncryptionAtHostSupported capability
// (absent: unknown). hyperVGenerations lists the VM
// generations the size boots, as Azure writes them ("V1", "V2"); absent
// means ["V2"], the generation every Arm64 size and every current x64 size
// boots (list "V1" for older sizes such as Standard_D2_v3, which boot only
// Gen1). `karpfunc catalog refresh` always writes it.
type file struct {
	Region        string             `json:"region"`
	Zones         []string           `json:"zones"`
	InstanceTypes []fileInstanceType `json:"instanceTypes"`
}

type fileInstanceType struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	// HyperVGenerations is omitted when nil.
	HyperVGenerations []string           `json:"hyperVGenerations,omitempty"`
	Capacity          map[string]string  `json:"capacity"`
	Overhead          *map[string]string `json:"overhead"`
	Labels            map[string]string  `json:"labels"`
	Offerings         []fileOffering     `json:"offerings"`
	// LocalDisks and EncryptionAtHostSupported are omitted when unknown.
	LocalDisks                *LocalDisks `json:"localDisks,omitempty"`
	EncryptionAtHostSupported *bool       `json:"encryptionAtHostSupported,omitempty"`
}

type fileOffering struct {
	Zone         string   `json:"zone"`
	CapacityType string   `json:"capacityType"`
	Price        *float64 `json:"price"`
	Available    *bool    `json:"available"`
}

// Load reads a catalog file.
func Load(path string) (*Catalog, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading catalog file: %w", err)
	}
	return parse(path, raw)
}

// Parse reads a catalog in the file format.
func Parse(data []byte) (*Catalog, error) { return parse("catalog", data) }

func parse(source string, data []byte) (*Catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var parsed file
	if err := dec.Decode(&parsed); err != nil {
		return nil, NewInvalidCatalogError(source, -1, "", "", "not a catalog file (%v); see the format in pkg/catalog/file.go", err)
	}
	if parsed.Region == "" {
		return nil, NewInvalidCatalogError(source, -1, "", "region", "is required: set the ARM location name, e.g. \"eastus\"")
	}
	zones := map[string]bool{}
	for i, zone := range parsed.Zones {
		if !strings.HasPrefix(zone, parsed.Region+"-") {
			return nil, NewInvalidCatalogError(source, -1, "", fmt.Sprintf("zones[%d]", i), "%q is not a zone of %s; zones are written <region>-<n>, e.g. %s-1", zone, parsed.Region, parsed.Region)
		}
		zones[zone] = true
	}
	if len(parsed.InstanceTypes) == 0 {
		return nil, NewInvalidCatalogError(source, -1, "", "instanceTypes", "is empty: list at least one instance type")
	}
	cat := &Catalog{Region: parsed.Region, Zones: parsed.Zones}
	seen := map[string]int{}
	for i, fit := range parsed.InstanceTypes {
		invalid := func(field, format string, args ...any) error {
			return NewInvalidCatalogError(source, i, fit.Name, field, format, args...)
		}
		if fit.Name == "" {
			return nil, invalid("name", "is required")
		}
		if first, dup := seen[fit.Name]; dup {
			return nil, invalid("name", "duplicates instanceTypes[%d]; each instance type must appear once", first)
		}
		seen[fit.Name] = i
		it, err := parseInstanceType(parsed.Region, zones, fit, invalid)
		if err != nil {
			return nil, err
		}
		cat.InstanceTypes = append(cat.InstanceTypes, it)
	}
	return cat, nil
}

// invalidField reports a bad field of one instance type in a catalog file.
type invalidField func(field, format string, args ...any) error

// parseInstanceType checks one instance type of a catalog file and builds it,
// phase by phase: generations, capacity, overhead, labels, offerings.
func parseInstanceType(region string, zones map[string]bool, f fileInstanceType, invalid func(string, string, ...any) error) (*InstanceType, error) {
	if f.Architecture != "amd64" && f.Architecture != "arm64" {
		return nil, invalid("architecture", "is %q; use \"amd64\" or \"arm64\"", f.Architecture)
	}
	generations, err := parseHyperVGenerations(f.HyperVGenerations, invalid)
	if err != nil {
		return nil, err
	}
	capacity, err := parseCapacity(f.Capacity, invalid)
	if err != nil {
		return nil, err
	}
	cpu := capacity[corev1.ResourceCPU]
	memory := capacity[corev1.ResourceMemory]
	it := &InstanceType{
		Name:              f.Name,
		Architecture:      f.Architecture,
		HyperVGenerations: generations,
		Capacity:          capacity,
		vcpus:             (cpu.MilliValue() + 999) / 1000,
		memoryMiB:         memory.Value() >> 20,
	}
	// The reservations are AKS's for the size's memory, which a refreshed
	// file records in the sku-memory label (capacity is after VM overhead).
	if skuMemory, ok := f.Labels[LabelSKUMemory]; ok {
		mib, err := strconv.ParseInt(skuMemory, 10, 64)
		if err != nil || mib <= 0 {
			return nil, invalid("labels."+LabelSKUMemory, "is %q; it is the size's memory in MiB, a positive integer, e.g. \"16384\"", skuMemory)
		}
		it.memoryMiB = mib
	}
	if f.Overhead != nil {
		if it.Overhead, err = parseResources(*f.Overhead, "overhead", invalid); err != nil {
			return nil, err
		}
		it.fixedOverhead = true
	} else {
		pods := capacity[corev1.ResourcePods]
		it.Overhead = KubeletReservations(it.vcpus, it.memoryMiB, int32(pods.Value())).Overhead(capacity)
	}
	gpuCount, manufacturer := gpus(capacity)
	it.Labels = deriveLabels(skuFacts{
		name: f.Name, architecture: f.Architecture, vcpus: it.vcpus, memoryMiB: it.memoryMiB,
		gpuCount: gpuCount, gpuManufacturer: manufacturer, region: region,
	})
	if it.LocalDisks, err = checkLocalDisks(f.LocalDisks, invalid); err != nil {
		return nil, err
	}
	addEphemeralOSLabel(it.Labels, it.LocalDisks)
	it.EncryptionAtHostSupported = f.EncryptionAtHostSupported
	if err := mergeLabels(it.Labels, f.Labels, invalid); err != nil {
		return nil, err
	}
	if it.Offerings, err = parseOfferings(zones, f.Offerings, invalid); err != nil {
		return nil, err
	}
	return it, nil
}

// parseHyperVGenerations checks the VM generations a size boots, sorted and
// without duplicates; absent means ["V2"].
func parseHyperVGenerations(generations []string, invalid invalidField) ([]string, error) {
	if generations == nil {
		return []string{"V2"}, nil
	}
	if len(generations) == 0 {
		return nil, invalid("hyperVGenerations", "is empty; list the VM generations the size boots, e.g. [\"V1\", \"V2\"], or leave the field out for [\"V2\"]")
	}
	for index, generation := range generations {
		if generation != "V1" && generation != "V2" {
			return nil, invalid(fmt.Sprintf("hyperVGenerations[%d]", index), "is %q; use \"V1\" or \"V2\" as Azure writes them", generation)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(generations))), nil
}

// parseCapacity checks an instance type's capacity: cpu and memory are
// required and positive; pods defaults to the AKS default max pods and must
// be a positive int32.
func parseCapacity(in map[string]string, invalid invalidField) (corev1.ResourceList, error) {
	capacity, err := parseResources(in, "capacity", invalid)
	if err != nil {
		return nil, err
	}
	if cpu, ok := capacity[corev1.ResourceCPU]; !ok || cpu.Sign() <= 0 {
		return nil, invalid("capacity.cpu", "is required and must be positive, e.g. \"4\"")
	}
	if memory, ok := capacity[corev1.ResourceMemory]; !ok || memory.Sign() <= 0 {
		return nil, invalid("capacity.memory", "is required and must be positive, e.g. \"16Gi\"")
	}
	pods, hasPods := capacity[corev1.ResourcePods]
	if !hasPods {
		pods = *resource.NewQuantity(int64(v1beta1.DefaultMaxPods), resource.DecimalSI)
		capacity[corev1.ResourcePods] = pods
	}
	if pods.Value() <= 0 || pods.Value() > math.MaxInt32 {
		return nil, invalid("capacity.pods", "is %s; it must be a positive whole number", pods.String())
	}
	return capacity, nil
}

// gpus is the instance type's GPU count and manufacturer ("" without GPUs):
// AMD when it has AMD GPUs, else NVIDIA.
func gpus(capacity corev1.ResourceList) (int64, string) {
	if amd := capacity[ResourceAMDGPU]; amd.Sign() > 0 {
		return amd.Value(), "amd"
	}
	if nvidia := capacity[ResourceNvidiaGPU]; nvidia.Sign() > 0 {
		return nvidia.Value(), "nvidia"
	}
	return 0, ""
}

// mergeLabels adds the file's labels to the derived ones; the instance-type
// and architecture labels may only repeat what the instance type says.
func mergeLabels(labels, fileLabels map[string]string, invalid invalidField) error {
	for key, value := range fileLabels {
		pinned := key == corev1.LabelInstanceTypeStable || key == corev1.LabelArchStable
		if derived, ok := labels[key]; ok && pinned && derived != value {
			return invalid("labels."+key, "is %q but the instance type says %q; remove the label or make them agree", value, derived)
		}
		labels[key] = value
	}
	return nil
}

// parseOfferings checks an instance type's offerings: at least one, each in
// a catalog zone (or zoneless in a non-zonal catalog), with a known capacity
// type and a finite non-negative price; available unless it says otherwise.
func parseOfferings(zones map[string]bool, in []fileOffering, invalid invalidField) ([]Offering, error) {
	if len(in) == 0 {
		return nil, invalid("offerings", "is empty: list at least one {zone, capacityType, price}")
	}
	var out []Offering
	for index, offering := range in {
		if err := checkOffering(zones, offering, fmt.Sprintf("offerings[%d]", index), invalid); err != nil {
			return nil, err
		}
		available := true
		if offering.Available != nil {
			available = *offering.Available
		}
		out = append(out, Offering{Zone: offering.Zone, CapacityType: offering.CapacityType, Price: *offering.Price, Available: available})
	}
	return out, nil
}

func checkOffering(zones map[string]bool, offering fileOffering, field string, invalid invalidField) error {
	switch {
	case len(zones) > 0 && !zones[offering.Zone]:
		return invalid(field+".zone", "%q is not in the catalog's zones %v", offering.Zone, sortedKeys(zones))
	case len(zones) == 0 && offering.Zone != "":
		return invalid(field+".zone", "is %q but the catalog lists no zones; list it in zones or leave zone empty for a non-zonal region", offering.Zone)
	case offering.CapacityType != karpv1.CapacityTypeOnDemand && offering.CapacityType != karpv1.CapacityTypeSpot:
		return invalid(field+".capacityType", "is %q; use %q or %q", offering.CapacityType, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot)
	case offering.Price == nil:
		return invalid(field+".price", "is required (USD per hour)")
	case math.IsNaN(*offering.Price) || math.IsInf(*offering.Price, 0) || *offering.Price < 0:
		return invalid(field+".price", "is %v; it must be a non-negative USD per hour", *offering.Price)
	}
	return nil
}

func parseResources(in map[string]string, field string, invalid func(string, string, ...any) error) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, value := range in {
		quantity, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, invalid(field+"."+name, "%q is not a Kubernetes quantity (%v); write e.g. \"4\", \"500m\", \"16Gi\"", value, err)
		}
		if quantity.Sign() < 0 {
			return nil, invalid(field+"."+name, "is %s; it must not be negative", value)
		}
		out[corev1.ResourceName(name)] = quantity
	}
	return out, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for key := range m {
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}
