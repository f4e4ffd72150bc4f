package nodeimage_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

const (
	testSub = "00000000-0000-0000-0000-000000000001"
	testLoc = "eastus"
)

type staticToken string

func (tk staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(tk), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// galleryClient is the real armcompute client for community gallery image
// versions, pointed at an emulator holding versions.
func galleryClient(t *testing.T, versions []armemulator.GalleryVersion) (*armemulator.Server, *armcompute.CommunityGalleryImageVersionsClient) {
	t.Helper()
	sku := &armcompute.ResourceSKU{Name: new("Standard_D2s_v5"), ResourceType: new("virtualMachines"), Locations: []*string{new(testLoc)}}
	s, err := armemulator.Start(context.Background(), armemulator.Options{SubscriptionIDs: []string{testSub}, GalleryVersions: versions,
		SKUs: []*armcompute.ResourceSKU{sku}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	cfg := cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
		cloud.ResourceManager: {Endpoint: s.URL(), Audience: "https://management.core.windows.net/"}}}
	opts := &arm.ClientOptions{DisableRPRegistration: true, ClientOptions: policy.ClientOptions{Cloud: cfg,
		Transport: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}}
	c, err := armcompute.NewCommunityGalleryImageVersionsClient(testSub, staticToken(s.Token()), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func day(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }

func TestResolveAgainstGallery(t *testing.T) {
	now := day(20)
	for _, tc := range []struct {
		name     string
		versions []armemulator.GalleryVersion
		pin      string
		want     string
		wantErr  bool
	}{
		{"latest published wins", []armemulator.GalleryVersion{
			{Name: "202611.02.0", Published: day(2)}, {Name: "202611.16.0", Published: day(16)}, {Name: "202611.09.0", Published: day(9)},
		}, "", "202611.16.0", false},
		{"excluded from latest is skipped", []armemulator.GalleryVersion{
			{Name: "202611.02.0", Published: day(2)}, {Name: "202611.16.0", Published: day(16), ExcludeFromLatest: true},
		}, "", "202611.02.0", false},
		{"past end of life is skipped", []armemulator.GalleryVersion{
			{Name: "202611.02.0", Published: day(2)}, {Name: "202611.16.0", Published: day(16), EndOfLife: day(19)},
		}, "", "202611.02.0", false},
		{"same day: higher patch", []armemulator.GalleryVersion{
			{Name: "202611.16.1", Published: day(16)}, {Name: "202611.16.0", Published: day(16)},
		}, "", "202611.16.1", false},
		{"pin honoured", []armemulator.GalleryVersion{{Name: "202611.16.0", Published: day(16)}}, "202611.02.0", "202611.02.0", false},
		{"nothing current", []armemulator.GalleryVersion{{Name: "202611.16.0", Published: day(16), ExcludeFromLatest: true}}, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := galleryClient(t, tc.versions)
			r, err := nodeimage.NewResolver(nodeimage.ResolverOptions{Versions: c, Location: testLoc, Pin: tc.pin, Clock: clocktesting.NewFakePassiveClock(now)})
			if err != nil {
				t.Fatal(err)
			}
			img, err := r.Resolve(context.Background(), nodeimage.Want{Family: nodeimage.FamilyUbuntu2204, Architecture: "amd64",
				Generations: []string{"V1", "V2"}, KubernetesVersion: "1.33.2"})
			var rerr *nodeimage.ResolveError
			if tc.wantErr {
				if !errors.As(err, &rerr) {
					t.Fatalf("Resolve = %v, %v; want a *ResolveError", img, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := "/CommunityGalleries/" + nodeimage.UbuntuGallery + "/images/2204gen2containerd/versions/" + tc.want
			if img.ID() != want {
				t.Fatalf("Resolve = %s, want %s", img.ID(), want)
			}
		})
	}
}

// The resolved version is kept for the TTL, then read again: a new AKS
// release reaches launches (and drift) without a restart.
func TestResolveCachesForTTL(t *testing.T) {
	s, c := galleryClient(t, []armemulator.GalleryVersion{{Name: "202611.02.0", Published: day(2)}})
	clk := clocktesting.NewFakePassiveClock(day(20))
	r, err := nodeimage.NewResolver(nodeimage.ResolverOptions{Versions: c, Location: testLoc, TTL: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	resolve := func() string {
		t.Helper()
		img, err := r.Resolve(context.Background(), nodeimage.Want{Family: nodeimage.FamilyAzureLinux, Architecture: "arm64",
			Generations: []string{"V2"}, KubernetesVersion: "1.33.2"})
		if err != nil {
			t.Fatal(err)
		}
		return img.Version
	}
	if got := resolve(); got != "202611.02.0" {
		t.Fatalf("first resolve = %s", got)
	}
	s.SetGalleryVersions([]armemulator.GalleryVersion{{Name: "202611.02.0", Published: day(2)}, {Name: "202611.16.0", Published: day(16)}})
	if got := resolve(); got != "202611.02.0" {
		t.Fatalf("within the TTL = %s, want the cached 202611.02.0", got)
	}
	clk.SetTime(day(20).Add(time.Hour + time.Second))
	if got := resolve(); got != "202611.16.0" {
		t.Fatalf("after the TTL = %s, want the new release 202611.16.0", got)
	}
}

// The listing holds what the gallery holds; a definition it does not have
// is GalleryImageNotFound. (A VM create naming a version the gallery no
// longer holds is refused with the same code: internal/armemulator
// TestVMRefusals, "image version the gallery no longer holds".)
func TestGalleryListing(t *testing.T) {
	_, c := galleryClient(t, []armemulator.GalleryVersion{{Name: "202611.16.0", Published: day(16)}})
	pager := c.NewListPager(testLoc, nodeimage.UbuntuGallery, "2204gen2containerd", nil)
	page, err := pager.NextPage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Value) != 1 || *page.Value[0].Name != "202611.16.0" {
		t.Fatalf("listing = %v", page.Value)
	}
	// An image definition the gallery does not have: GalleryImageNotFound.
	_, err = c.NewListPager(testLoc, nodeimage.UbuntuGallery, "1804containerd", nil).NextPage(context.Background())
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != "GalleryImageNotFound" {
		t.Fatalf("listing an unknown definition = %v, want GalleryImageNotFound", err)
	}
}
