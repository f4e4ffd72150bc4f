package catalog

import (
	"regexp"
	"strings"
)

// SizeName is an Azure VM size name split by Azure's naming convention
// (https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions):
// [Family][Subfamily][vCPUs][-constrained][features][_accelerator][_version].
type SizeName struct {
	Family    string // "D" in Standard_D4s_v5
	Subfamily string // "C" in Standard_NC24ads_A100_v4
	VCPUs     string // "4"
	Features  string // "s", "ads", "ps", "ms"
	// Accelerator is the GPU model named in the size, e.g. "A100".
	Accelerator string
	// Version is the generation without the "v"; "1" when the name has none,
	// as the Azure provider writes it.
	Version string

	hasVersion bool
}

// Series is the family, subfamily and features with the version, the value
// of karpenter.azure.com/sku-series: "Ds_v5", "NCads_v4", "Bms".
func (s SizeName) Series() string {
	series := s.Family + s.Subfamily + s.Features
	if s.hasVersion {
		series += "_v" + s.Version
	}
	return series
}

var (
	sizeCore    = regexp.MustCompile(`^([A-Z])([A-Z]*)([0-9]+)(?:-[0-9]+)?([A-Za-z]*)$`)
	sizeVersion = regexp.MustCompile(`_[vV]([0-9]+)$`)
	accelerator = regexp.MustCompile(`^[A-Z]+[0-9]+[A-Z]*$`)
)

// ParseSizeName parses names like Standard_D4s_v5 or Standard_NC24ads_A100_v4.
// It returns false for names that do not follow the convention (synthetic
// catalogs may use any name).
func ParseSizeName(name string) (SizeName, bool) {
	rest, ok := strings.CutPrefix(name, "Standard_")
	if !ok {
		return SizeName{}, false
	}
	var size SizeName
	size.Version = "1"
	if match := sizeVersion.FindStringSubmatch(rest); match != nil {
		size.Version = match[1]
		size.hasVersion = true
		rest = rest[:len(rest)-len(match[0])]
	}
	tokens := strings.Split(rest, "_")
	match := sizeCore.FindStringSubmatch(tokens[0])
	if match == nil {
		return SizeName{}, false
	}
	size.Family = match[1]
	size.Subfamily = match[2]
	size.VCPUs = match[3]
	size.Features = match[4]
	for _, token := range tokens[1:] {
		if accelerator.MatchString(token) {
			size.Accelerator = token
		}
	}
	return size, true
}
