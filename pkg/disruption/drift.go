package disruption

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
)

// AKSNodeClass hash annotations (karpenter-provider-azure's keys).
const (
	NodeClassHashAnnotationKey        = v1beta1.Group + "/aksnodeclass-hash"
	NodeClassHashVersionAnnotationKey = v1beta1.Group + "/aksnodeclass-hash-version"
	NodeClassHashVersion              = "v1"
)

// Drift reasons: Karpenter's (NodePoolDrifted, RequirementsDrifted) and
// the Azure provider's (Azure/karpenter-provider-azure
// pkg/cloudprovider/drift.go: NodeClassDrift, K8sVersionDrift, ImageDrift).
const (
	DriftNodePool     = "NodePoolDrifted"
	DriftRequirements = "RequirementsDrifted"
	DriftNodeClass    = "NodeClassDrift"
	DriftK8sVersion   = "K8sVersionDrift"
	DriftImage        = "ImageDrift"
)

// Versions are what nodes should run now; drift compares every NodeClaim
// with them. The zero value judges no versions.
type Versions struct {
	// Images maps an image definition (nodeimage.Image.DefinitionKey) to
	// the image ID new nodes of that definition boot (the gallery's
	// current version, or the pin). A NodeClaim whose status.imageID is of
	// a definition not in the map is not judged on its image (its version
	// could not be resolved: the provider skips the check too).
	Images map[string]string
	// Kubernetes is the control plane's Kubernetes version ("1.33.2");
	// "" skips the Kubernetes version check.
	Kubernetes string
}

// Drift replaces nodes that no longer match their NodePool or
// AKSNodeClass. Empty drifted nodes go together; otherwise one node at a
// time, with whatever replacements its pods need. Drift skips validation
// delay, as Karpenter does. Static NodePools' nodes are StaticDrift's
// (Karpenter's drift.go:59).
type Drift struct{}

func (Drift) Name() string   { return MethodDrift }
func (Drift) Reason() Reason { return ReasonDrifted }
func (Drift) ShouldDisrupt(c *Candidate) bool {
	return c.Drift != "" && c.DriftHeld == "" && !staticcapacity.IsStatic(c.NodePool)
}

func (Drift) ComputeCommands(e *Engine, budgets Budgets, cands []*Candidate) ([]*Command, []Refusal) {
	remaining := budgets.clone()
	var empty []*Candidate
	var refusals []Refusal
	for _, candidate := range cands {
		if len(candidate.Pods) == 0 && remaining.Allowed(candidate.NodePool.Name, ReasonDrifted) > 0 {
			empty = append(empty, candidate)
			remaining.Take(candidate.NodePool.Name, 1)
		}
	}
	if len(empty) > 0 {
		return []*Command{{Reason: ReasonDrifted, Method: MethodDrift, Candidates: empty, Savings: sumPrice(empty)}}, nil
	}
	if e.pending > 0 {
		return nil, nil // provisioning acts first
	}
	for _, candidate := range cands {
		if budgets.Allowed(candidate.NodePool.Name, ReasonDrifted) <= 0 {
			refusals = append(refusals, Refusal{NodeClaim: candidate.Name(), Blocked: true, Reason: "drifted (" + candidate.Drift + ") but the NodePool's budget for Drifted allows no more disruptions now"})
			continue
		}
		sim := e.Simulate([]*Candidate{candidate})
		if sim.Unplaced != "" {
			refusals = append(refusals, Refusal{NodeClaim: candidate.Name(), Reason: "drifted (" + candidate.Drift + ") but " + sim.Unplaced})
			continue
		}
		cmd := &Command{Reason: ReasonDrifted, Method: MethodDrift, Candidates: []*Candidate{candidate}, Replacements: sim.Result.NewNodeClaims, Existing: sim.Result.Existing}
		cmd.Savings = candidate.Price - replacementPrice(cmd.Replacements)
		return []*Command{cmd}, refusals
	}
	return nil, refusals
}

type classInfo struct{ hash, family string }

// desired is what drift compares a NodeClaim with beyond its NodePool.
type desired struct {
	classes  map[string]classInfo
	versions Versions
}

func classIndex(c *snapshot.Cluster) map[string]classInfo {
	out := map[string]classInfo{}
	for _, nc := range c.NodeClasses {
		out[nc.Name] = classInfo{hash: NodeClassHash(nc), family: *nc.DefaultedSpec().ImageFamily}
	}
	return out
}

// NodeClassHash is a stable hash of an AKSNodeClass spec.
func NodeClassHash(nc *v1beta1.AKSNodeClass) string {
	js, _ := json.Marshal(nc.Spec) // a spec always marshals; encoding/json sorts map keys
	hasher := fnv.New64a()
	hasher.Write(js)
	return fmt.Sprint(hasher.Sum64())
}

// HashAnnotations are stamped on a NodeClaim at creation so drift can be
// detected later.
func HashAnnotations(np *karpv1.NodePool, class *v1beta1.AKSNodeClass) map[string]string {
	out := map[string]string{
		karpv1.NodePoolHashAnnotationKey:        np.Hash(),
		karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
	}
	if class != nil {
		out[NodeClassHashAnnotationKey] = NodeClassHash(class)
		out[NodeClassHashVersionAnnotationKey] = NodeClassHashVersion
	}
	return out
}

// drift says why nc (on node, nil if none yet) no longer matches ("" if
// it does), in the order Karpenter and the provider check: NodePool,
// requirements, AKSNodeClass, Kubernetes version, image. NodeClaims
// without hash annotations (made before they were stamped, or by another
// tool) are not judged on the hashes.
func drift(nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, want desired) string {
	if why := specDrift(nc, np, want.classes); why != "" {
		return why
	}
	if versionDrifted(node, want.versions.Kubernetes) {
		return DriftK8sVersion
	}
	if imageDrifted(nc, want.versions.Images) || definitionDrifted(nc, np, want) {
		return DriftImage
	}
	return ""
}

// definitionDrifted: at the control plane's Kubernetes version, nc's
// AKSNodeClass boots another image definition than nc booted (a
// control-plane upgrade across 1.34 moves imageFamily Ubuntu from 22.04 to
// 24.04, across 1.32 AzureLinux from 2.0 to 3.0; package nodeimage). The
// provider gets the same from its status.images, which list the new
// definitions after the upgrade. A class AKS does not offer at the version
// is not judged here: its ImagesReady is False and nothing replaces the
// node.
func definitionDrifted(nc *karpv1.NodeClaim, np *karpv1.NodePool, want desired) bool {
	img, ok := nodeimage.Parse(nc.Status.ImageID)
	ref := np.Spec.Template.Spec.NodeClassRef
	if !ok || ref == nil || want.versions.Kubernetes == "" {
		return false
	}
	class, ok := want.classes[ref.Name]
	if !ok {
		return false
	}
	now, err := nodeimage.Definition(nodeimage.Want{Family: class.family, Architecture: img.Architecture,
		Generations: []string{img.Generation}, KubernetesVersion: want.versions.Kubernetes})
	return err == nil && now.DefinitionKey() != img.DefinitionKey()
}

// versionDrifted: the node's kubelet is not the control plane's version
// (the provider compares node.status.nodeInfo.kubeletVersion without its
// "v" with the cluster's version, isK8sVersionDrifted).
func versionDrifted(node *corev1.Node, kubernetes string) bool {
	if node == nil || kubernetes == "" || node.Status.NodeInfo.KubeletVersion == "" {
		return false
	}
	return strings.TrimPrefix(node.Status.NodeInfo.KubeletVersion, "v") != strings.TrimPrefix(kubernetes, "v")
}

// imageDrifted: nc booted another version of its image definition than
// new nodes boot now (the provider: status.imageID not among the
// AKSNodeClass's current images, isImageVersionDrifted).
func imageDrifted(nc *karpv1.NodeClaim, images map[string]string) bool {
	img, ok := nodeimage.Parse(nc.Status.ImageID)
	if !ok {
		return false
	}
	want, ok := images[img.DefinitionKey()]
	return ok && !strings.EqualFold(want, nc.Status.ImageID)
}

// specDrift: nc's NodePool or AKSNodeClass changed since it was made.
func specDrift(nc *karpv1.NodeClaim, np *karpv1.NodePool, classes map[string]classInfo) string {
	if hash := nc.Annotations[karpv1.NodePoolHashAnnotationKey]; hash != "" &&
		nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] == karpv1.NodePoolHashVersion && hash != np.Hash() {
		return DriftNodePool
	}
	if why := requirementsDrift(nc, np); why != "" {
		return DriftRequirements + ": " + why
	}
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return ""
	}
	if ci, ok := classes[ref.Name]; ok {
		if hash := nc.Annotations[NodeClassHashAnnotationKey]; hash != "" &&
			nc.Annotations[NodeClassHashVersionAnnotationKey] == NodeClassHashVersion && hash != ci.hash {
			return DriftNodeClass
		}
	}
	return ""
}

// requirementsDrift: a label the NodeClaim carries is no longer allowed by
// the NodePool's requirements.
func requirementsDrift(nc *karpv1.NodeClaim, np *karpv1.NodePool) string {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
	var bad []string
	for _, key := range sets.List(reqs.Keys()) {
		// A label the NodeClaim does not carry cannot be judged here.
		if value, ok := nc.Labels[key]; ok && !reqs.Get(key).Has(value) {
			bad = append(bad, fmt.Sprintf("%s=%s", key, value))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return strings.Join(bad, ", ") + " no longer allowed by the NodePool's requirements"
}
