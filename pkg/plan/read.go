// Package plan reads Kubernetes objects from YAML or JSON files (what
// `kubectl get -o yaml` prints) into a scheduler.Input, and renders the
// scheduler's Result for people (table) and programs (JSON). It backs
// `karpfunc plan`, the offline planner.
package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// Objects are the Kubernetes objects the planner understands.
type Objects struct {
	Pods                   []*corev1.Pod
	Nodes                  []*corev1.Node
	DaemonSets             []*appsv1.DaemonSet
	NodePools              []*karpv1.NodePool
	NodeClasses            []*v1beta1.AKSNodeClass
	NodeClaims             []*karpv1.NodeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	// Namespaces carry the labels pod (anti-)affinity namespaceSelectors
	// match.
	Namespaces []*corev1.Namespace
	// Warnings are things that were read but skipped (unknown kinds,
	// finished pods), one line each, naming the file and document.
	Warnings []string
}

// DocumentError says which file and document could not be read.
type DocumentError struct {
	File string
	// Document is 1-based; 0 means the file as a whole.
	Document int
	// Item is the 1-based position inside a List, 0 if not in a List.
	Item int
	Err  error
}

func (e *DocumentError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Document > 0 {
		fmt.Fprintf(&b, ": document %d", e.Document)
	}
	if e.Item > 0 {
		fmt.Fprintf(&b, ", item %d", e.Item)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// Read adds the objects in r (YAML or JSON, several documents separated by
// "---", or a kind: List) to o. name is used in errors and warnings. It
// fails only when a document cannot be parsed as the kind it declares;
// unknown kinds become warnings.
func (o *Objects) Read(name string, r io.Reader) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &DocumentError{File: name, Document: doc, Err: err}
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			doc-- // a leading "---" or an empty document is not counted
			continue
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return &DocumentError{File: name, Document: doc, Err: fmt.Errorf("not valid YAML or JSON: %w", err)}
		}
		if err := o.add(name, doc, 0, js); err != nil {
			return err
		}
	}
}

func stripComments(raw []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, t...)
		}
	}
	return out
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (o *Objects) add(file string, doc, item int, js []byte) error {
	fail := func(format string, args ...any) error {
		return &DocumentError{File: file, Document: doc, Item: item, Err: fmt.Errorf(format, args...)}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fail("not a Kubernetes object: %v", err)
	}
	if tm.Kind == "" {
		return fail("has no kind; every object needs apiVersion and kind")
	}
	group, _, _ := strings.Cut(tm.APIVersion, "/")
	if !strings.Contains(tm.APIVersion, "/") {
		group = "" // core: "v1"
	}
	if tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") && tm.Items != nil {
		if item > 0 {
			return fail("a List inside a List is not supported")
		}
		for i, it := range tm.Items {
			if err := o.add(file, doc, i+1, it); err != nil {
				return err
			}
		}
		return nil
	}
	where := fmt.Sprintf("%s: document %d", file, doc)
	if item > 0 {
		where += fmt.Sprintf(", item %d", item)
	}
	objName := tm.Metadata.Name
	if tm.Metadata.Namespace != "" {
		objName = tm.Metadata.Namespace + "/" + objName
	}
	decode := func(into any) error {
		if err := json.Unmarshal(js, into); err != nil {
			return fail("%s %s: %v", tm.Kind, objName, err)
		}
		return nil
	}
	var err error
	switch gk := group + "/" + tm.Kind; gk {
	case "/Pod":
		p := &corev1.Pod{}
		if err = decode(p); err == nil {
			o.Pods = append(o.Pods, p)
		}
	case "/Node":
		n := &corev1.Node{}
		if err = decode(n); err == nil {
			o.Nodes = append(o.Nodes, n)
		}
	case "apps/DaemonSet":
		ds := &appsv1.DaemonSet{}
		if err = decode(ds); err == nil {
			o.DaemonSets = append(o.DaemonSets, ds)
		}
	case "karpenter.sh/NodePool":
		np := &karpv1.NodePool{}
		if err = decode(np); err == nil {
			o.NodePools = append(o.NodePools, np)
		}
	case "karpenter.sh/NodeClaim":
		nc := &karpv1.NodeClaim{}
		if err = decode(nc); err == nil {
			o.NodeClaims = append(o.NodeClaims, nc)
		}
	case v1beta1.SchemeGroupVersion.Group + "/AKSNodeClass":
		nc := &v1beta1.AKSNodeClass{}
		if err = decode(nc); err == nil {
			o.NodeClasses = append(o.NodeClasses, nc)
			if unsupported := unsupportedFields(nc); len(unsupported) > 0 {
				o.Warnings = append(o.Warnings, fmt.Sprintf("%s: AKSNodeClass %s sets %s, which karpfunc does not support yet; the API server would reject it",
					where, nc.Name, strings.Join(unsupported, ", ")))
			}
		}
	case "/PersistentVolume":
		pv := &corev1.PersistentVolume{}
		if err = decode(pv); err == nil {
			o.PersistentVolumes = append(o.PersistentVolumes, pv)
		}
	case "/PersistentVolumeClaim":
		pvc := &corev1.PersistentVolumeClaim{}
		if err = decode(pvc); err == nil {
			o.PersistentVolumeClaims = append(o.PersistentVolumeClaims, pvc)
		}
	case "/Namespace":
		ns := &corev1.Namespace{}
		if err = decode(ns); err == nil {
			o.Namespaces = append(o.Namespaces, ns)
		}
	case "storage.k8s.io/StorageClass":
		sc := &storagev1.StorageClass{}
		if err = decode(sc); err == nil {
			o.StorageClasses = append(o.StorageClasses, sc)
		}
	default:
		o.Warnings = append(o.Warnings, fmt.Sprintf("%s: ignoring %s %s (kind %s, apiVersion %s is not used by the planner)",
			where, tm.Kind, objName, tm.Kind, tm.APIVersion))
	}
	return err
}

func unsupportedFields(nc *v1beta1.AKSNodeClass) []string {
	var out []string
	if nc.Spec.FIPSMode != nil {
		out = append(out, "spec.fipsMode")
	}
	if nc.Spec.Security != nil {
		out = append(out, "spec.security")
	}
	if nc.Spec.LocalDNS != nil {
		out = append(out, "spec.localDNS")
	}
	if nc.Spec.ArtifactStreaming != nil {
		out = append(out, "spec.artifactStreaming")
	}
	return out
}

// Input builds the scheduler's snapshot: pods with a nodeName are bound, the
// rest are pending. Finished pods, pods being deleted and DaemonSet pods
// (which the DaemonSet controller places, not the autoscaler) are not
// pending.
func (o *Objects) Input(c *catalog.Catalog) scheduler.Input {
	in := scheduler.Input{
		Nodes: o.Nodes, NodeClaims: o.NodeClaims, NodePools: o.NodePools, NodeClasses: o.NodeClasses,
		DaemonSets: o.DaemonSets, Catalog: c,
		PersistentVolumes: o.PersistentVolumes, PersistentVolumeClaims: o.PersistentVolumeClaims, StorageClasses: o.StorageClasses,
		Namespaces: o.Namespaces,
	}
	for _, p := range o.Pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			continue
		case p.Spec.NodeName != "":
			in.BoundPods = append(in.BoundPods, p)
		case p.DeletionTimestamp != nil || ownedByDaemonSet(p):
			continue
		default:
			in.Pods = append(in.Pods, p)
		}
	}
	return in
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" && (ref.Controller == nil || *ref.Controller) {
			return true
		}
	}
	return false
}

// Region guesses the region from the Nodes' topology.kubernetes.io/region
// label; "" if none carries it.
func (o *Objects) Region() string {
	for _, n := range o.Nodes {
		if r := n.Labels[corev1.LabelTopologyRegion]; r != "" {
			return r
		}
	}
	return ""
}
