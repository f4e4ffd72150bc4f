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
	"runtime"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// Objects are the Kubernetes objects the planner understands: the cluster
// snapshot (one home: pkg/snapshot) plus what reading it warned about.
type Objects struct {
	snapshot.Cluster
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
	// Splitting into documents is cheap; converting YAML to JSON is most
	// of the cost, so documents are converted in parallel and added in
	// their order.
	type document struct {
		doc int
		raw []byte
		js  []byte
		err error
	}
	var docs []*document
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			docs = append(docs, &document{doc: doc, err: err})
			break
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			doc-- // a leading "---" or an empty document is not counted
			continue
		}
		docs = append(docs, &document{doc: doc, raw: raw})
	}
	var wg sync.WaitGroup
	next := make(chan *document)
	for range min(runtime.GOMAXPROCS(0), max(1, len(docs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				if d.err != nil {
					continue
				}
				if js, err := yaml.YAMLToJSON(d.raw); err != nil {
					d.err = fmt.Errorf("not valid YAML or JSON: %w", err)
				} else {
					d.js = js
				}
			}
		}()
	}
	for _, d := range docs {
		next <- d
	}
	close(next)
	wg.Wait()
	for _, d := range docs {
		if d.err != nil {
			return &DocumentError{File: name, Document: d.doc, Err: d.err}
		}
		if err := o.add(name, d.doc, 0, d.js); err != nil {
			return err
		}
	}
	return nil
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
	case "policy/PodDisruptionBudget":
		pdb := &policyv1.PodDisruptionBudget{}
		if err = decode(pdb); err == nil {
			o.PodDisruptionBudgets = append(o.PodDisruptionBudgets, pdb)
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

// Input builds the scheduler's snapshot through the one constructor the
// live loop uses; in a dump every unbound pod counts as pending (dumps are
// often written without status).
func (o *Objects) Input(c *catalog.Catalog) scheduler.Input {
	return o.Cluster.Input(c, snapshot.Offline)
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
