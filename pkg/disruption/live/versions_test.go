package live

import (
	"context"
	"errors"
	"testing"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

type galleryStub struct {
	version string
	fail    map[string]bool // definition names that cannot be resolved
	calls   int
}

func (g *galleryStub) Current(_ context.Context, img nodeimage.Image) (nodeimage.Image, error) {
	g.calls++
	if g.fail[img.Definition] {
		return nodeimage.Image{}, errors.New("gallery unavailable")
	}
	img.Version = g.version
	return img, nil
}

// TestNodeVersions: each booted definition is resolved once; one that
// cannot be is left out (its drift check waits) and the error says so.
func TestNodeVersions(t *testing.T) {
	claim := func(id string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ImageID: id}}
	}
	gen2 := "/CommunityGalleries/" + nodeimage.UbuntuGallery + "/images/2204gen2containerd/versions/202510.03.0"
	arm := "/CommunityGalleries/" + nodeimage.AzureLinuxGallery + "/images/V2gen2arm64/versions/202510.03.0"
	stub := &galleryStub{version: "202511.07.0", fail: map[string]bool{"V2gen2arm64": true}}
	src := NodeVersions{Images: stub, Kubernetes: func(context.Context) (string, error) { return "1.34.1", nil }}
	v, err := src.Versions(context.Background(), []*karpv1.NodeClaim{claim(gen2), claim(gen2), claim(arm), claim(""), claim("/subscriptions/x/images/custom")})
	if err == nil {
		t.Error("no error for the definition that could not be resolved")
	}
	img, _ := nodeimage.Parse(gen2)
	want := "/CommunityGalleries/" + nodeimage.UbuntuGallery + "/images/2204gen2containerd/versions/202511.07.0"
	if got := v.Images[img.DefinitionKey()]; got != want || len(v.Images) != 1 {
		t.Errorf("images %v, want only %s", v.Images, want)
	}
	if stub.calls != 2 || v.Kubernetes != "1.34.1" {
		t.Errorf("%d resolutions, Kubernetes %q; want 2 and 1.34.1", stub.calls, v.Kubernetes)
	}
}
