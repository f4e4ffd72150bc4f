package nodeimage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long a Resolver keeps a definition's resolved version:
// the Azure provider's ImageExpirationInterval (3 days,
// Azure/karpenter-provider-azure pkg/providers/imagefamily/nodeimage.go).
// A new AKS node image therefore reaches new launches, and drifts existing
// nodes, within DefaultTTL of the first resolution on a warm instance; a
// cold instance reads the gallery again at once.
const DefaultTTL = 3 * 24 * time.Hour

// VersionLister lists the versions of a community gallery image
// definition: *armcompute.CommunityGalleryImageVersionsClient (GET
// /subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/communityGalleries/{gallery}/images/{definition}/versions).
type VersionLister interface {
	NewListPager(location, publicGalleryName, galleryImageName string, options *armcompute.CommunityGalleryImageVersionsClientListOptions) *runtime.Pager[armcompute.CommunityGalleryImageVersionsClientListResponse]
}

// ResolverOptions configure a Resolver.
type ResolverOptions struct {
	// Versions lists gallery versions; required unless Pin is set.
	Versions VersionLister
	// Location is the region whose gallery replicas are listed; required
	// unless Pin is set.
	Location string
	// Pin is a node image version (YYYYMM.DD.patch) every node boots
	// instead of the gallery's latest; "" resolves the latest.
	Pin string
	// TTL is how long a resolved version is kept (default DefaultTTL).
	TTL time.Duration
	// Clock (default the real clock).
	Clock clock.PassiveClock
}

// Resolver completes node images with their current version. It is safe
// for concurrent use; its cache lives as long as the Resolver (one warm
// Functions instance).
type Resolver struct {
	opts  ResolverOptions
	mu    sync.Mutex
	cache map[string]cachedVersion
}

type cachedVersion struct {
	version string
	until   time.Time
}

// NewResolver checks opts and returns a Resolver.
func NewResolver(opts ResolverOptions) (*Resolver, error) {
	if opts.Pin != "" {
		if err := ValidateVersion(opts.Pin); err != nil {
			return nil, fmt.Errorf("pinned node image version: %w", err)
		}
	} else if opts.Versions == nil || opts.Location == "" {
		return nil, errors.New("node image resolver: without a pinned version it needs the gallery client and the location to list versions in")
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Resolver{opts: opts, cache: map[string]cachedVersion{}}, nil
}

// Pinned is the pinned version ("" when versions are resolved).
func (r *Resolver) Pinned() string { return r.opts.Pin }

// Resolve is the image w boots: Definition at its current version. This is
// the function the AKSNodeClass status.images writer calls per (family,
// arch, generation) and a launch calls for its VM.
func (r *Resolver) Resolve(ctx context.Context, w Want) (Image, error) {
	img, err := Definition(w)
	if err != nil {
		return Image{}, err
	}
	return r.Current(ctx, img)
}

// Current is img's definition at its current version: the pin, else the
// gallery's latest (cached for the TTL).
func (r *Resolver) Current(ctx context.Context, img Image) (Image, error) {
	if r.opts.Pin != "" {
		img.Version = r.opts.Pin
		return img, nil
	}
	key := img.DefinitionKey()
	now := r.opts.Clock.Now()
	r.mu.Lock()
	cached, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(cached.until) {
		img.Version = cached.version
		return img, nil
	}
	version, err := r.latest(ctx, img)
	if err != nil {
		return Image{}, err
	}
	r.mu.Lock()
	r.cache[key] = cachedVersion{version: version, until: now.Add(r.opts.TTL)}
	r.mu.Unlock()
	img.Version = version
	return img, nil
}

// Forget drops img's cached version, so the next Current lists the
// gallery again (after ARM said the version is gone).
func (r *Resolver) Forget(img Image) {
	r.mu.Lock()
	delete(r.cache, img.DefinitionKey())
	r.mu.Unlock()
}

// ResolveError is a gallery listing that gave no version.
type ResolveError struct {
	Image Image
	error
}

func (e *ResolveError) Error() string {
	return fmt.Sprintf("resolving the node image version of %s/%s: %v", e.Image.Gallery, e.Image.Definition, e.error)
}

func (e *ResolveError) Unwrap() error { return e.error }

func (r *Resolver) latest(ctx context.Context, img Image) (string, error) {
	pager := r.opts.Versions.NewListPager(r.opts.Location, img.Gallery, img.Definition, nil)
	var all []*armcompute.CommunityGalleryImageVersion
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return "", &ResolveError{Image: img, error: err}
		}
		all = append(all, page.Value...)
	}
	version := Latest(all, r.opts.Clock.Now())
	if version == "" {
		return "", &ResolveError{Image: img, error: fmt.Errorf("the gallery lists %d versions in %s, none of them current "+
			"(all excluded from latest or past their end of life); pin one with KARPFUNC_NODE_IMAGE_VERSION", len(all), r.opts.Location)}
	}
	return version, nil
}

// Latest picks the version new nodes boot from a gallery listing at now:
// the most recently published one, as the Azure provider picks
// (latestNodeImageVersionCommunity in pkg/providers/imagefamily/nodeimage.go),
// among those a VM may take as "latest" — not excludeFromLatest (ARM:
// "Virtual Machines deployed from the latest version of the Image
// Definition won't use this Image Version", armcompute
// CommunityGalleryImageVersionProperties) and not past their endOfLifeDate.
// A tie in publishedDate goes to the higher version. "" when none qualifies.
func Latest(versions []*armcompute.CommunityGalleryImageVersion, now time.Time) string {
	var best *armcompute.CommunityGalleryImageVersion
	for _, version := range versions {
		if !current(version, now) {
			continue
		}
		if best == nil || newer(version, best) {
			best = version
		}
	}
	if best == nil {
		return ""
	}
	return *best.Name
}

func current(v *armcompute.CommunityGalleryImageVersion, now time.Time) bool {
	if v == nil || v.Name == nil || ValidateVersion(*v.Name) != nil {
		return false
	}
	props := v.Properties
	if props == nil || props.PublishedDate == nil {
		return false
	}
	if props.ExcludeFromLatest != nil && *props.ExcludeFromLatest {
		return false
	}
	return props.EndOfLifeDate == nil || props.EndOfLifeDate.After(now)
}

func newer(a, b *armcompute.CommunityGalleryImageVersion) bool {
	publishedA := *a.Properties.PublishedDate
	publishedB := *b.Properties.PublishedDate
	if !publishedA.Equal(publishedB) {
		return publishedA.After(publishedB)
	}
	return compareVersions(*a.Name, *b.Name) > 0
}

// compareVersions orders two valid YYYYMM.DD.patch versions.
func compareVersions(a, b string) int {
	partsA := strings.Split(a, ".")
	partsB := strings.Split(b, ".")
	for i := range partsA {
		if order := cmpNumeric(partsA[i], partsB[i]); order != 0 {
			return order
		}
	}
	return 0
}

func cmpNumeric(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
