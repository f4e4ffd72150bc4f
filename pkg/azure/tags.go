package azure

import (
	"strings"
	"time"

	"github.com/karpfunc/karpfunc/pkg/ownership"
)

// Tag keys put on every VM and NIC we create. Azure tag names cannot contain
// '/', so, like the Azure Karpenter provider, the label keys are written
// with '_' in its place ("karpenter.sh/nodepool" -> "karpenter.sh_nodepool").
// Keeping the provider's spelling means tooling written for NAP/Karpenter
// (e.g. `az vm list --query "[?tags.\"karpenter.azure.com_cluster\"]"`) finds
// our VMs too.
const (
	// TagCluster marks a resource as managed by karpfunc for one cluster; the
	// garbage-collection sweep and List select on it.
	TagCluster = "karpenter.azure.com_cluster"
	// TagNodePool names the NodePool the resource was launched for.
	TagNodePool = "karpenter.sh_nodepool"
	// TagNodeClaim names the NodeClaim the resource backs.
	TagNodeClaim = "karpenter.sh_nodeclaim"
	// TagCreated is when karpfunc created the resource (RFC 3339); the
	// sweep's grace period for NICs, which have no creation time, reads it.
	TagCreated = "karpfunc.azure.com_created"
	// TagManagedBy is karpfunc's own mark (value ownership.Value).
	// TagCluster is shared with the Azure Karpenter provider (NAP): List,
	// ListNICs and so the Sweep see only resources with both tags, so
	// karpfunc never deletes a VM or NIC another controller made.
	TagManagedBy = "karpfunc.azure.com_managed-by"
)

// TagKey converts a Kubernetes-style key into a valid Azure tag name.
func TagKey(key string) string { return strings.ReplaceAll(key, "/", "_") }

// buildTags merges the user's tags with ours. Ours win: a NodeClass must not
// be able to hide a VM from the garbage collector by overriding the cluster
// tag.
func buildTags(cluster string, req LaunchRequest) map[string]*string {
	tags := make(map[string]*string, len(req.Tags)+3)
	for key, value := range req.Tags {
		tags[TagKey(key)] = ptr(value)
	}
	tags[TagCluster] = ptr(cluster)
	tags[TagManagedBy] = ptr(ownership.Value)
	tags[TagNodePool] = ptr(req.NodePool)
	tags[TagNodeClaim] = ptr(req.NodeClaim)
	tags[TagCreated] = ptr(time.Now().UTC().Format(time.RFC3339))
	return tags
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func fromTags(tags map[string]*string) map[string]string {
	out := make(map[string]string, len(tags))
	for key, value := range tags {
		out[key] = deref(value)
	}
	return out
}
