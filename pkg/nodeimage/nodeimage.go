// Package nodeimage picks the AKS node image a VM size boots: the image
// family of the AKSNodeClass, the size's CPU architecture and its Hyper-V
// generations decide the image definition in AKS's community galleries
// (Definition, Select); a Resolver completes the image ID with the
// definition's current version, read from the gallery through ARM, or with
// a pinned version.
//
// Invariants: Definition and Select are pure (same input, same image); a
// size that supports both generations boots the Gen2 image, as the Azure
// provider prefers; Arm64 images exist only for Gen2; a size with no image
// for its family, architecture and generations gets a *NoImageError, never
// a guess (ARM would refuse the VM, see internal/armemulator). A Resolver
// never invents a version: it answers the pin or a version the gallery
// listed, and an error otherwise.
package nodeimage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Image families, the AKSNodeClass spec.imageFamily values.
const (
	FamilyUbuntu     = "Ubuntu"
	FamilyUbuntu2204 = "Ubuntu2204"
	FamilyUbuntu2404 = "Ubuntu2404"
	FamilyAzureLinux = "AzureLinux"
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
	Family       string
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

// definitions per family, in preference order (first match wins).
var definitions = map[string][]definition{
	FamilyUbuntu2204: {
		{UbuntuGallery, "2204gen2containerd", "amd64", GenerationV2},
		{UbuntuGallery, "2204containerd", "amd64", GenerationV1},
		{UbuntuGallery, "2204gen2arm64containerd", "arm64", GenerationV2},
	},
	FamilyUbuntu2404: {
		{UbuntuGallery, "2404gen2containerd", "amd64", GenerationV2},
		{UbuntuGallery, "2404containerd", "amd64", GenerationV1},
		{UbuntuGallery, "2404gen2arm64containerd", "arm64", GenerationV2},
	},
	FamilyAzureLinux: {
		{AzureLinuxGallery, "V2gen2", "amd64", GenerationV2},
		{AzureLinuxGallery, "V2", "amd64", GenerationV1},
		{AzureLinuxGallery, "V2gen2arm64", "arm64", GenerationV2},
	},
}

// Families lists the image families karpfunc can boot.
func Families() []string {
	return []string{FamilyUbuntu, FamilyUbuntu2204, FamilyUbuntu2404, FamilyAzureLinux}
}

func canonical(family string) string {
	if family == "" || family == FamilyUbuntu {
		return FamilyUbuntu2204 // the Azure provider's default for Ubuntu
	}
	return family
}

// NoImageError says a size has no node image in a family.
type NoImageError struct {
	Family, Architecture string
	Generations          []string
}

func (e *NoImageError) Error() string {
	gens := "no Hyper-V generation"
	if len(e.Generations) > 0 {
		gens = "Hyper-V generation " + strings.Join(e.Generations, "/")
	}
	return fmt.Sprintf("image family %s has no %s node image for %s", e.Family, e.Architecture, gens)
}

// UnknownFamilyError is an image family karpfunc does not know.
type UnknownFamilyError struct{ Family string }

func (e *UnknownFamilyError) Error() string {
	return fmt.Sprintf("image family %q is not one of %s", e.Family, strings.Join(Families(), ", "))
}

// Supports reports whether family has an image for a size with arch and
// generations, without choosing a version.
func Supports(family, arch string, generations []string) error {
	_, err := Definition(family, arch, generations)
	return err
}

// Definition picks the image definition a size with arch ("amd64",
// "arm64"; "" means amd64) and generations boots in family; the Image it
// returns has no Version.
func Definition(family, arch string, generations []string) (Image, error) {
	if arch == "" {
		arch = "amd64"
	}
	defs, ok := definitions[canonical(family)]
	if !ok {
		return Image{}, &UnknownFamilyError{Family: family}
	}
	for _, def := range defs {
		if def.arch == arch && slices.Contains(generations, def.gen) {
			return Image{Family: canonical(family), Gallery: def.gallery, Definition: def.name, Architecture: arch, Generation: def.gen}, nil
		}
	}
	return Image{}, &NoImageError{Family: family, Architecture: arch, Generations: slices.Clone(generations)}
}

// Select is Definition at version.
func Select(family, arch string, generations []string, version string) (Image, error) {
	if err := ValidateVersion(version); err != nil {
		return Image{}, err
	}
	img, err := Definition(family, arch, generations)
	if err != nil {
		return Image{}, err
	}
	img.Version = version
	return img, nil
}

// Definitions lists every image definition this package boots (no Version).
func Definitions() []Image {
	var out []Image
	for _, family := range []string{FamilyUbuntu2204, FamilyUbuntu2404, FamilyAzureLinux} {
		for _, def := range definitions[family] {
			out = append(out, Image{Family: family, Gallery: def.gallery, Definition: def.name, Architecture: def.arch, Generation: def.gen})
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
	for family, defs := range definitions {
		for _, def := range defs {
			if strings.EqualFold(def.gallery, seg[1]) && strings.EqualFold(def.name, seg[3]) {
				return Image{Family: family, Gallery: def.gallery, Definition: def.name, Architecture: def.arch, Generation: def.gen, Version: seg[5]}, true
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
