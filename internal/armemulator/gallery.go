package armemulator

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// GalleryVersion is one version of AKS's node images in its community
// galleries. AKS publishes a node image release for every image definition
// at once, so the emulator's galleries hold the same versions for every
// definition pkg/nodeimage knows.
type GalleryVersion struct {
	Name              string // YYYYMM.DD.patch
	Published         time.Time
	ExcludeFromLatest bool
	EndOfLife         time.Time // zero: none
}

// DefaultGalleryVersions are the versions served when Options leaves
// GalleryVersions nil: two releases, the newer one the latest.
func DefaultGalleryVersions() []GalleryVersion {
	return []GalleryVersion{
		{Name: "202510.03.0", Published: time.Date(2025, 10, 3, 0, 0, 0, 0, time.UTC)},
		{Name: nodeimage.ExampleVersion, Published: time.Date(2025, 11, 7, 0, 0, 0, 0, time.UTC)},
	}
}

// SetGalleryVersions replaces the versions the galleries hold: a new AKS
// release (append one) or a removed old one (leave it out). VMs already
// created from a removed version keep running, as in Azure.
func (s *Server) SetGalleryVersions(versions []GalleryVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gallery = slices.Clone(versions)
}

// GalleryVersions returns the versions the galleries hold.
func (s *Server) GalleryVersions() []GalleryVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.gallery)
}

// knownDefinition reports whether gallery/definition is one of AKS's node
// image definitions.
func knownDefinition(gallery, definition string) bool {
	for _, image := range nodeimage.Definitions() {
		if strings.EqualFold(image.Gallery, gallery) && strings.EqualFold(image.Definition, definition) {
			return true
		}
	}
	return false
}

// galleryImageNotFound is ARM's answer for a community gallery image (or
// version) the gallery does not hold in the region: code
// GalleryImageNotFound, as a VM create referencing a community gallery
// image that is not there gets (kubernetes-sigs/cluster-api-provider-azure
// issue #5348, "I get GalleryImageNotFound ... not found in northcentralus
// region"). The status is 404; the message follows the one ARM writes
// ("is not available in <region> region"), not confirmed word for word.
func galleryImageNotFound(id, location string) refusal {
	return refusal{status: http.StatusNotFound, code: "GalleryImageNotFound", message: fmt.Sprintf(
		"The gallery image %s is not available in %s region. Please contact image owner to replicate to this region, or change your requested region.", id, location)}
}

// listGalleryVersions serves CommunityGalleryImageVersionsClient.NewListPager:
// GET /subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/communityGalleries/{gallery}/images/{definition}/versions
// (azure-rest-api-specs, ComputeRP CommunityGalleryImageVersions_List).
func (s *Server) listGalleryVersions(w http.ResponseWriter, r *http.Request, sub, location, gallery, definition string) {
	if _, done := s.inject(w, r, Request{Operation: OpListGalleryVersions, SubscriptionID: sub}); done {
		return
	}
	if loc := s.location(); loc != "" && !strings.EqualFold(loc, location) || !knownDefinition(gallery, definition) {
		writeRefusal(w, galleryImageNotFound("/CommunityGalleries/"+gallery+"/Images/"+definition, location))
		return
	}
	res := armcompute.CommunityGalleryImageVersionList{Value: []*armcompute.CommunityGalleryImageVersion{}}
	for _, version := range s.GalleryVersions() {
		item := &armcompute.CommunityGalleryImageVersion{
			Name:       ptr(version.Name),
			Location:   ptr(location),
			Type:       ptr("Microsoft.Compute/Locations/CommunityGalleries/Images/Versions"),
			Identifier: &armcompute.CommunityGalleryIdentifier{UniqueID: ptr("/CommunityGalleries/" + gallery + "/Images/" + definition + "/Versions/" + version.Name)},
			Properties: &armcompute.CommunityGalleryImageVersionProperties{
				PublishedDate:     ptr(version.Published),
				ExcludeFromLatest: ptr(version.ExcludeFromLatest),
			},
		}
		if !version.EndOfLife.IsZero() {
			item.Properties.EndOfLifeDate = ptr(version.EndOfLife)
		}
		res.Value = append(res.Value, item)
	}
	writeJSON(w, http.StatusOK, res)
}

// checkGalleryVersionLocked refuses a VM whose community gallery image
// version the gallery no longer holds (AKS removes old node image versions
// from its galleries). "latest" is ARM's alias for the newest version.
func (s *Server) checkGalleryVersionLocked(img nodeimage.Image, id, location string) refusal {
	if strings.EqualFold(img.Version, "latest") {
		return refusal{}
	}
	for _, version := range s.gallery {
		if version.Name == img.Version {
			return refusal{}
		}
	}
	return galleryImageNotFound(id, location)
}
