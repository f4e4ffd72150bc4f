package disruption

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// AKSNodeClass hash annotations (karpenter-provider-azure's keys).
const (
	NodeClassHashAnnotationKey        = v1beta1.Group + "/aksnodeclass-hash"
	NodeClassHashVersionAnnotationKey = v1beta1.Group + "/aksnodeclass-hash-version"
	NodeClassHashVersion              = "v1"
)

// Drift reasons (Karpenter's and the Azure provider's).
const (
	DriftNodePool     = "NodePoolDrifted"
	DriftRequirements = "RequirementsDrifted"
	DriftNodeClass    = "NodeClassDrift"
)

// Drift replaces nodes that no longer match their NodePool or
// AKSNodeClass. Empty drifted nodes go together; otherwise one node at a
// time, with whatever replacements its pods need. Drift skips validation
// delay, as Karpenter does.
type Drift struct{}

func (Drift) Reason() Reason                  { return ReasonDrifted }
func (Drift) ShouldDisrupt(c *Candidate) bool { return c.Drift != "" }

func (Drift) ComputeCommands(e *Engine, budgets Budgets, cands []*Candidate) ([]*Command, []Refusal) {
	b := budgets.clone()
	var empty []*Candidate
	var refusals []Refusal
	for _, c := range cands {
		if len(c.Pods) == 0 && b.Allowed(c.NodePool.Name, ReasonDrifted) > 0 {
			empty = append(empty, c)
			b.Take(c.NodePool.Name, 1)
		}
	}
	if len(empty) > 0 {
		return []*Command{{Reason: ReasonDrifted, Method: "drift", Candidates: empty, Savings: sumPrice(empty)}}, nil
	}
	if e.pending > 0 {
		return nil, nil // provisioning acts first
	}
	for _, c := range cands {
		if budgets.Allowed(c.NodePool.Name, ReasonDrifted) <= 0 {
			refusals = append(refusals, Refusal{NodeClaim: c.Name(), Blocked: true, Reason: "drifted (" + c.Drift + ") but the NodePool's budget for Drifted allows no more disruptions now"})
			continue
		}
		sim := e.Simulate([]*Candidate{c})
		if sim.Unplaced != "" {
			refusals = append(refusals, Refusal{NodeClaim: c.Name(), Reason: "drifted (" + c.Drift + ") but " + sim.Unplaced})
			continue
		}
		cmd := &Command{Reason: ReasonDrifted, Method: "drift", Candidates: []*Candidate{c}, Replacements: sim.Result.NewNodeClaims, Existing: sim.Result.Existing}
		cmd.Savings = c.Price - replacementPrice(cmd.Replacements)
		return []*Command{cmd}, refusals
	}
	return nil, refusals
}

type classInfo struct{ hash string }

func classIndex(c *snapshot.Cluster) map[string]classInfo {
	out := map[string]classInfo{}
	for _, nc := range c.NodeClasses {
		out[nc.Name] = classInfo{hash: NodeClassHash(nc)}
	}
	return out
}

// NodeClassHash is a stable hash of an AKSNodeClass spec.
func NodeClassHash(nc *v1beta1.AKSNodeClass) string {
	js, _ := json.Marshal(nc.Spec) // a spec always marshals; encoding/json sorts map keys
	h := fnv.New64a()
	h.Write(js)
	return fmt.Sprint(h.Sum64())
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

// drift says why nc no longer matches ("" if it does). NodeClaims without
// hash annotations (made before they were stamped, or by another tool) are
// judged on requirements only.
func drift(nc *karpv1.NodeClaim, np *karpv1.NodePool, classes map[string]classInfo) string {
	if h := nc.Annotations[karpv1.NodePoolHashAnnotationKey]; h != "" &&
		nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] == karpv1.NodePoolHashVersion && h != np.Hash() {
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
		if h := nc.Annotations[NodeClassHashAnnotationKey]; h != "" &&
			nc.Annotations[NodeClassHashVersionAnnotationKey] == NodeClassHashVersion && h != ci.hash {
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
		if v, ok := nc.Labels[key]; ok && !reqs.Get(key).Has(v) {
			bad = append(bad, fmt.Sprintf("%s=%s", key, v))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return strings.Join(bad, ", ") + " no longer allowed by the NodePool's requirements"
}
