// Package exclude is the one rule that decides which Azure VM sizes karpfunc
// may launch as AKS Linux nodes. The embedded catalog's generator and
// `karpfunc catalog refresh` both ask it, so a size is left out for the same
// reason whichever way a catalog was built. It follows the Azure Karpenter
// provider's exclusions where the facts support them.
//
// The rule is here rather than on catalog.SKUFacts because the generator
// cannot depend on package catalog: that package embeds the file the
// generator writes, and SKUFacts decides GPU support by looking the size up
// in that file, which would stop the generator from ever adding a new GPU
// size.
package exclude

import (
	"fmt"
	"regexp"
	"strings"
)

// Facts are what the rule needs to know about a VM size. A nil pointer means
// the source did not say.
type Facts struct {
	Name string
	Tier string // Standard or Basic
	// VCPUs, MemoryGiB and Architecture (x64 or Arm64, as Azure writes it).
	VCPUs        *int64
	MemoryGiB    *float64
	Architecture *string
	// GPU is whether the size has GPUs and whether karpfunc can use them.
	// The caller decides: the generator from its public sources, refresh
	// from the embedded catalog, because the Resource SKUs API gives a GPU
	// count but neither maker nor model.
	GPU GPU
}

// GPU classifies a size's GPUs.
type GPU int

const (
	// NoGPU is a size without GPUs.
	NoGPU GPU = iota
	// SupportedGPU has a known count of GPUs whose maker is in Karpenter's
	// supported-GPU list, so AKS images carry a driver for them.
	SupportedGPU
	// UnsupportedGPU has GPUs that AKS images have no driver for, or whose
	// maker is only guessed.
	UnsupportedGPU
	// GPUCountUnknown has GPUs, but not how many: its capacity cannot be
	// stated, so the scheduler could not place GPU pods on it.
	GPUCountUnknown
)

// restricted are the sizes the Azure provider says AKS does not support.
// Today each is also too small, but the list is the provider's word and
// stays in case a size's facts are corrected.
var restricted = map[string]bool{
	"Standard_A0": true, "Standard_A1": true, "Standard_A1_v2": true,
	"Standard_B1s": true, "Standard_B1ms": true, "Standard_F1": true, "Standard_F1s": true,
}

// constrainedVCPU matches sizes like Standard_M8-2ms and Standard_DS11-1_v2:
// a large size's memory with fewer vCPUs enabled, which the provider drops.
var constrainedVCPU = regexp.MustCompile(`^Standard_[A-Za-z]+[0-9]+-[0-9]+`)

// KubeArch turns Azure's CPU architecture into the kubernetes.io/arch value;
// ok is false for an architecture karpfunc has no node image for.
func KubeArch(azure string) (arch string, ok bool) {
	switch azure {
	case "x64":
		return "amd64", true
	case "Arm64":
		return "arm64", true
	}
	return "", false
}

// rules are Reason's checks in order, each with the reason it gives. The
// capacity rules after "unknown vcpus/memory/architecture" may dereference
// what that rule checked.
var rules = []struct {
	reason  string
	matches func(Facts) bool
}{
	// Retired, and AKS does not offer them.
	{"basic tier", func(f Facts) bool { return f.Tier != "Standard" || !strings.HasPrefix(f.Name, "Standard_") }},
	// Retired promotional sizes.
	{"promo", func(f Facts) bool { return strings.HasSuffix(f.Name, "_Promo") }},
	// Capacity could not be stated.
	{"unknown vcpus/memory/architecture", func(f Facts) bool { return f.VCPUs == nil || f.MemoryGiB == nil || f.Architecture == nil }},
	// AKS refuses them as nodes.
	{"fewer than 2 vCPUs", func(f Facts) bool { return *f.VCPUs < 2 }},
	{"less than 3.5 GiB", func(f Facts) bool { return *f.MemoryGiB < 3.5 }},
	{"restricted by AKS", func(f Facts) bool { return restricted[f.Name] }},
	{"constrained vCPU", func(f Facts) bool { return constrainedVCPU.MatchString(f.Name) }},
	// The provider does not support confidential VMs yet.
	{"confidential", func(f Facts) bool {
		return strings.HasPrefix(f.Name, "Standard_DC") || strings.HasPrefix(f.Name, "Standard_EC")
	}},
}

// Reason says why f cannot be an AKS Linux node for karpfunc; "" when it can.
// The first matching reason wins, so the reasons counted by the callers are
// stable.
func Reason(f Facts) string {
	for _, rule := range rules {
		if rule.matches(f) {
			return rule.reason
		}
	}
	if _, ok := KubeArch(*f.Architecture); !ok {
		return fmt.Sprintf("unknown architecture %q", *f.Architecture)
	}
	switch f.GPU {
	case NoGPU, SupportedGPU:
		return ""
	case GPUCountUnknown:
		return "gpu count unknown"
	default:
		// UnsupportedGPU, and any value a caller invents: without a known
		// driver the GPUs would be unusable, so exclude rather than guess.
		return "gpu not in the supported list"
	}
}
