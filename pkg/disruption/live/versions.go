package live

import (
	"context"
	"errors"
	"fmt"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// NodeVersions is the VersionSource of a running cluster: each
// NodeClaim's image definition at its current version (Images), and the
// control plane's Kubernetes version (Kubernetes).
type NodeVersions struct {
	Images interface {
		Current(ctx context.Context, img nodeimage.Image) (nodeimage.Image, error)
	}
	Kubernetes func(ctx context.Context) (string, error)
}

// Versions resolves every image definition the claims booted, once each.
func (n NodeVersions) Versions(ctx context.Context, claims []*karpv1.NodeClaim) (disruption.Versions, error) {
	out := disruption.Versions{Images: map[string]string{}}
	var errs []error
	for _, nc := range claims {
		img, ok := nodeimage.Parse(nc.Status.ImageID)
		if !ok || n.Images == nil {
			continue
		}
		if _, done := out.Images[img.DefinitionKey()]; done {
			continue
		}
		cur, err := n.Images.Current(ctx, img)
		if err != nil {
			errs = append(errs, err)
			out.Images[img.DefinitionKey()] = "" // tried; dropped below
			continue
		}
		out.Images[img.DefinitionKey()] = cur.ID()
	}
	for key, id := range out.Images {
		if id == "" {
			delete(out.Images, key)
		}
	}
	if n.Kubernetes != nil {
		version, err := n.Kubernetes(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the control plane's Kubernetes version: %w", err))
		}
		out.Kubernetes = version
	}
	return out, errors.Join(errs...)
}
