// Package nodeimage picks the AKS node image a VM size boots: the image
// family of the AKSNodeClass and the cluster's Kubernetes version decide
// the operating system (OSFor, the Azure provider's rules), the size's CPU
// architecture and its Hyper-V generations the image definition in AKS's
// community galleries (Definition, Select); a Resolver completes the image
// ID with the definition's current version, read from the gallery through
// ARM, or with a pinned version.
//
// Invariants: OSFor, Definition and Select are pure (same input, same
// image); a size that supports both generations boots the Gen2 image, as the
// Azure provider prefers; Arm64 images exist only for Gen2; a family whose
// operating system AKS does not support at the cluster's Kubernetes version
// gets an *UnsupportedVersionError, and a size with no image for its
// family, architecture and generations a *NoImageError, never a guess (ARM
// or the node would refuse it, see internal/armemulator). A Resolver never
// invents a version: it answers the pin or a version the gallery listed,
// and an error otherwise.
package nodeimage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Image families, the AKSNodeClass spec.imageFamily values.
const (
	FamilyUbuntu     = "Ubuntu"
	FamilyUbuntu2204 = "Ubuntu2204"
	FamilyUbuntu2404 = "Ubuntu2404"
	FamilyAzureLinux = "AzureLinux"
)

// Operating systems of AKS's Linux node images: what an image family
// resolves to at a Kubernetes version.
const (
	OSUbuntu2004    = "Ubuntu2004"
	OSUbuntu2204    = "Ubuntu2204"
	OSUbuntu2404    = "Ubuntu2404"
	OSAzureLinux2   = "AzureLinux2"
	OSAzureLinux3   = "AzureLinux3"
	ubuntu2404Minor = 34 // the provider's UseUbuntu2404
	azureLinux3Min  = 32 // the provider's UseAzureLinux3
)

// Hyper-V generations as Azure writes them.
const (
	GenerationV1 = "V1"
	GenerationV2 = "V2"
)

// ExampleVersion is an AKS node image version (YYYYMM.DD.patch), as error
// messages show one. No version is built in: AKS removes old versions from
// its galleries after some months, so a Resolver reads the current one.
const ExampleVersion = "202511.07.0"

// The community galleries AKS publishes its node images in.
const (
	UbuntuGallery     = "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2"
	AzureLinuxGallery = "AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b"
)

// Image is one node image.
type Image struct {
	// OS is the operating system of the definition (OSUbuntu2204, ...).
	OS           string
	Gallery      string
	Definition   string // e.g. 2204gen2containerd
	Architecture string // amd64 | arm64
	Generation   string // V1 | V2
	Version      string
}

// ID is the community gallery image version ID ARM takes as
// storageProfile.imageReference.communityGalleryImageId.
func (i Image) ID() string {
	return "/CommunityGalleries/" + i.Gallery + "/images/" + i.Definition + "/versions/" + i.Version
}

type definition struct {
	gallery, name, arch, gen string
}

// definitions per operating system, in preference order (first match
// wins), as the Azure provider lists them (Azure/karpenter-provider-azure
// @352646f5 pkg/providers/imagefamily: ubuntu_2204.go:35-37,
// ubuntu_2404.go:35-37, azlinux.go:35-37, azlinux3.go:35-37). FIPS and
// Trusted Launch definitions are not listed: karpfunc boots neither (see
// Want).
var definitions = map[string][]definition{
	OSUbuntu2204: {
		{UbuntuGallery, "2204gen2containerd", "amd64", GenerationV2},
		{UbuntuGallery, "2204containerd", "amd64", GenerationV1},
		{UbuntuGallery, "2204gen2arm64containerd", "arm64", GenerationV2},
	},
	OSUbuntu2404: {
		{UbuntuGallery, "2404gen2containerd", "amd64", GenerationV2},
		{UbuntuGallery, "2404containerd", "amd64", GenerationV1},
		{UbuntuGallery, "2404gen2arm64containerd", "arm64", GenerationV2},
	},
	OSAzureLinux2: {
		{AzureLinuxGallery, "V2gen2", "amd64", GenerationV2},
		{AzureLinuxGallery, "V2", "amd64", GenerationV1},
		{AzureLinuxGallery, "V2gen2arm64", "arm64", GenerationV2},
	},
	OSAzureLinux3: {
		{AzureLinuxGallery, "V3gen2", "amd64", GenerationV2},
		{AzureLinuxGallery, "V3", "amd64", GenerationV1},
		{AzureLinuxGallery, "V3gen2arm64", "arm64", GenerationV2},
	},
}

// osOrder lists the operating systems in a stable order.
var osOrder = []string{OSUbuntu2204, OSUbuntu2404, OSAzureLinux2, OSAzureLinux3}

// Support is the Kubernetes minor versions AKS supports an operating
// system's node images at (Learn, "Upgrade operating system (OS) versions
// in AKS", https://learn.microsoft.com/azure/aks/upgrade-os-version, the
// "Supported OS versions" table: Ubuntu2204 1.25 to 1.33, Ubuntu2404 1.32
// to 1.38, AzureLinux3 1.28 to 1.36; Azure Linux 2.0 is the default for
// 1.27 to 1.31). Retired says why no version is supported any more.
type Support struct {
	MinMinor, MaxMinor int
	Retired            string
}

// supported is the support table. Azure Linux 2.0's images were removed
// from AKS on 2026-03-31 (Learn, auto-upgrade-node-os-image: "images
// removed and node pools can't scale"): no version boots it any more.
var supported = map[string]Support{
	OSUbuntu2204:  {MinMinor: 25, MaxMinor: 33},
	OSUbuntu2404:  {MinMinor: 32, MaxMinor: 38},
	OSAzureLinux3: {MinMinor: 28, MaxMinor: 36},
	OSAzureLinux2: {MinMinor: 27, MaxMinor: 31, Retired: "Azure Linux 2.0 node images were removed from AKS on 2026-03-31 " +
		"(Learn: aks/auto-upgrade-node-os-image); upgrade the cluster to Kubernetes 1.32+, where imageFamily AzureLinux is Azure Linux 3.0"},
}

// SupportOf is os's row of the support table (ok false for an unknown os).
func SupportOf(os string) (Support, bool) {
	s, ok := supported[os]
	return s, ok
}

// Families lists the image families karpfunc can boot.
func Families() []string {
	return []string{FamilyUbuntu, FamilyUbuntu2204, FamilyUbuntu2404, FamilyAzureLinux}
}

// Want is what picks a node image definition: the AKSNodeClass's family,
// the size's architecture and Hyper-V generations, and the Kubernetes
// version the node runs. FIPS and TrustedLaunch follow the provider's
// family rules, but karpfunc boots neither (the AKSNodeClass schema refuses
// fipsMode FIPS and security.trustedLaunch): with either set, Definition answers an
// *UnsupportedFeatureError.
type Want struct {
	Family            string
	Architecture      string // amd64 | arm64; "" is amd64
	Generations       []string
	KubernetesVersion string // 1.33.2, with or without a leading v
	FIPS              bool
	TrustedLaunch     bool
}

// NoImageError says a size has no node image in a family.
type NoImageError struct {
	Family, OS, Architecture string
	Generations              []string
}

func (e *NoImageError) Error() string {
	gens := "no Hyper-V generation"
	if len(e.Generations) > 0 {
		gens = "Hyper-V generation " + strings.Join(e.Generations, "/")
	}
	return fmt.Sprintf("image family %s (%s) has no %s node image for %s", e.Family, e.OS, e.Architecture, gens)
}

// UnknownFamilyError is an image family karpfunc does not know.
type UnknownFamilyError struct{ Family string }

func (e *UnknownFamilyError) Error() string {
	return fmt.Sprintf("image family %q is not one of %s", e.Family, strings.Join(Families(), ", "))
}

// UnsupportedVersionError is a family whose operating system AKS does not
// support at the Kubernetes version.
type UnsupportedVersionError struct {
	Family, OS, KubernetesVersion string
	Support                       Support
}

func (e *UnsupportedVersionError) Error() string {
	if e.Support.Retired != "" {
		return fmt.Sprintf("image family %s is %s at Kubernetes %s: %s", e.Family, e.OS, e.KubernetesVersion, e.Support.Retired)
	}
	hint := "use imageFamily Ubuntu (its operating system follows the Kubernetes version)"
	return fmt.Sprintf("image family %s is %s, which AKS supports at Kubernetes 1.%d to 1.%d only, and the cluster runs %s "+
		"(Learn: aks/upgrade-os-version, Supported OS versions): %s", e.Family, e.OS, e.Support.MinMinor, e.Support.MaxMinor, e.KubernetesVersion, hint)
}

// UnsupportedFeatureError is a FIPS or Trusted Launch image, which karpfunc
// does not boot.
type UnsupportedFeatureError struct{ Feature, Reason string }

func (e *UnsupportedFeatureError) Error() string {
	return fmt.Sprintf("%s node images are not supported by karpfunc: %s", e.Feature, e.Reason)
}

// OSFor is the operating system family's images run at kubernetesVersion,
// by the Azure provider's rules (Azure/karpenter-provider-azure@352646f5
// pkg/providers/imagefamily/resolver.go:251-284 GetImageFamily and
// defaultUbuntu, utils.go:28-47 UseAzureLinux3 and UseUbuntu2404):
// Ubuntu2204 and Ubuntu2404 are themselves; AzureLinux is Azure Linux 3.0
// from Kubernetes 1.32, else 2.0; Ubuntu (or unset) is 22.04 with Trusted
// Launch, 20.04 with FIPS (22.04 with FIPS and Trusted Launch), else 24.04
// from 1.34 and 22.04 before. Unlike the provider, a version that does not
// parse is an error, not the older operating system.
func OSFor(family, kubernetesVersion string, fips, trustedLaunch bool) (string, error) {
	if kubernetesVersion == "" {
		return "", fmt.Errorf("node image: the Kubernetes version is needed to pick image family %s's operating system", family)
	}
	v, err := version.ParseGeneric(strings.TrimPrefix(kubernetesVersion, "v"))
	if err != nil || v.Major() != 1 {
		return "", fmt.Errorf("node image: Kubernetes version %q is not a version like 1.33.2", kubernetesVersion)
	}
	minor := int(v.Minor())
	switch family {
	case FamilyUbuntu2204:
		return OSUbuntu2204, nil
	case FamilyUbuntu2404:
		return OSUbuntu2404, nil
	case FamilyAzureLinux:
		if minor >= azureLinux3Min {
			return OSAzureLinux3, nil
		}
		return OSAzureLinux2, nil
	case FamilyUbuntu, "":
		switch {
		case fips && trustedLaunch, trustedLaunch:
			return OSUbuntu2204, nil
		case fips:
			return OSUbuntu2004, nil
		case minor >= ubuntu2404Minor:
			return OSUbuntu2404, nil
		}
		return OSUbuntu2204, nil
	}
	return "", &UnknownFamilyError{Family: family}
}

// CheckVersion says whether AKS supports family's operating system at
// kubernetesVersion: nil, or an *UnsupportedVersionError (or the error of
// OSFor).
func CheckVersion(family, kubernetesVersion string) (string, error) {
	os, err := OSFor(family, kubernetesVersion, false, false)
	if err != nil {
		return "", err
	}
	v, _ := version.ParseGeneric(strings.TrimPrefix(kubernetesVersion, "v")) // parsed by OSFor
	support := supported[os]
	if support.Retired != "" || int(v.Minor()) < support.MinMinor || int(v.Minor()) > support.MaxMinor {
		name := family
		if name == "" {
			name = FamilyUbuntu
		}
		return os, &UnsupportedVersionError{Family: name, OS: os, KubernetesVersion: strings.TrimPrefix(kubernetesVersion, "v"), Support: support}
	}
	return os, nil
}

// Supports reports whether family has an image for a size with arch and
// generations at some Kubernetes version, without choosing a version:
// every operating system a family resolves to has the same architectures
// and generations. Whether AKS offers the family at the cluster's version
// is CheckVersion (the AKSNodeClass's ImagesReady).
func Supports(family, arch string, generations []string) error {
	if arch == "" {
		arch = "amd64"
	}
	var os string
	switch family {
	case FamilyUbuntu, "", FamilyUbuntu2204:
		os = OSUbuntu2204
	case FamilyUbuntu2404:
		os = OSUbuntu2404
	case FamilyAzureLinux:
		os = OSAzureLinux3
	default:
		return &UnknownFamilyError{Family: family}
	}
	if _, ok := pick(os, arch, generations); !ok {
		return &NoImageError{Family: family, OS: os, Architecture: arch, Generations: slices.Clone(generations)}
	}
	return nil
}

func pick(os, arch string, generations []string) (definition, bool) {
	for _, def := range definitions[os] {
		if def.arch == arch && slices.Contains(generations, def.gen) {
			return def, true
		}
	}
	return definition{}, false
}

// Definition picks the image definition w boots; the Image it returns has
// no Version.
func Definition(w Want) (Image, error) {
	arch := w.Architecture
	if arch == "" {
		arch = "amd64"
	}
	family := w.Family
	if family == "" {
		family = FamilyUbuntu
	}
	switch {
	case w.FIPS:
		// The provider offers FIPS images only from AKS's shared image
		// galleries (pkg/controllers/nodeclass/status/images.go:116-124,
		// SIGRequiredForFIPS); karpfunc boots community gallery images.
		return Image{}, &UnsupportedFeatureError{Feature: "FIPS", Reason: "AKS publishes them only in its shared image galleries, not the community galleries karpfunc boots from"}
	case w.TrustedLaunch:
		return Image{}, &UnsupportedFeatureError{Feature: "Trusted Launch", Reason: "the VM would need a Trusted Launch security profile, which karpfunc does not set"}
	}
	os, err := CheckVersion(family, w.KubernetesVersion)
	if err != nil {
		return Image{}, err
	}
	def, ok := pick(os, arch, w.Generations)
	if !ok {
		return Image{}, &NoImageError{Family: family, OS: os, Architecture: arch, Generations: slices.Clone(w.Generations)}
	}
	return Image{OS: os, Gallery: def.gallery, Definition: def.name, Architecture: arch, Generation: def.gen}, nil
}

// Select is Definition at version.
func Select(w Want, version string) (Image, error) {
	if err := ValidateVersion(version); err != nil {
		return Image{}, err
	}
	img, err := Definition(w)
	if err != nil {
		return Image{}, err
	}
	img.Version = version
	return img, nil
}

// Definitions lists every image definition this package boots (no Version).
func Definitions() []Image {
	var out []Image
	for _, os := range osOrder {
		for _, def := range definitions[os] {
			out = append(out, Image{OS: os, Gallery: def.gallery, Definition: def.name, Architecture: def.arch, Generation: def.gen})
		}
	}
	return out
}

var versionRE = regexp.MustCompile(`^[0-9]{6}\.[0-9]{2}\.[0-9]+$`)

// ValidateVersion checks an AKS node image version (YYYYMM.DD.patch, e.g.
// 202511.07.0).
func ValidateVersion(v string) error {
	if !versionRE.MatchString(v) {
		return fmt.Errorf("node image version %q is not an AKS node image version (YYYYMM.DD.patch, e.g. %s)", v, ExampleVersion)
	}
	return nil
}

// Parse reads a community gallery image ID this package builds back into
// its Image; ok is false for any other image ID.
func Parse(id string) (Image, bool) {
	seg := strings.Split(strings.Trim(id, "/"), "/")
	if len(seg) != 6 || !strings.EqualFold(seg[0], "CommunityGalleries") || !strings.EqualFold(seg[2], "images") || !strings.EqualFold(seg[4], "versions") {
		return Image{}, false
	}
	for os, defs := range definitions {
		for _, def := range defs {
			if strings.EqualFold(def.gallery, seg[1]) && strings.EqualFold(def.name, seg[3]) {
				return Image{OS: os, Gallery: def.gallery, Definition: def.name, Architecture: def.arch, Generation: def.gen, Version: seg[5]}, true
			}
		}
	}
	return Image{}, false
}

// DefinitionKey names img's image definition (gallery and definition,
// case-folded as ARM compares them), whatever its version.
func (i Image) DefinitionKey() string {
	return strings.ToLower(i.Gallery + "/" + i.Definition)
}
