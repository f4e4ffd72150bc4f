// Package plan reads Kubernetes objects from YAML or JSON files (what
// `kubectl get -o yaml` prints) into a scheduler.Input, and renders the
// scheduler's Result for people (table) and programs (JSON). It backs
// `karpfunc plan`, the offline planner.
package plan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// Objects are the Kubernetes objects the planner understands: the cluster
// snapshot (one home: pkg/snapshot) plus what reading it warned about.
type Objects struct {
	snapshot.Cluster
	// NodeOverlays (karpenter.sh/v1alpha1) change the prices and
	// capacities the plan decides with (see Overlays).
	NodeOverlays []*v1alpha1.NodeOverlay
	// Warnings are things that were read but skipped (unknown kinds,
	// finished pods), one line each, naming the file and document.
	Warnings []string
	// CapacityBuffers and the PodTemplates and workloads that shape them.
	CapacityBuffers []*autoscalingv1beta1.CapacityBuffer
	BufferObjects   capacitybuffer.Objects
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

// Read adds the objects in r to o: YAML documents separated by "---", or
// JSON documents one after another (a file whose first character is "{"),
// each an object or a kind: List. name is used in errors and warnings. It
// fails when a document cannot be parsed as the kind it declares, or holds
// what the API server would refuse in a field planning reads (an
// *InvalidError naming the fields, see validate.go); unknown kinds become
// warnings. Pods' requests are defaulted from their limits as the API
// server stores them.
func (o *Objects) Read(name string, r io.Reader) error {
	buffered := bufio.NewReaderSize(r, 1<<16)
	if startsWithJSON(buffered) {
		return o.readJSON(name, buffered)
	}
	return o.readYAML(name, buffered)
}

// readYAML reads YAML documents separated by "---", a List's items one by
// one (see splitYAMLStream). Splitting is cheap; converting YAML to JSON and decoding are the cost, so
// the pool converts and decodes them in parallel while the rest is split.
func (o *Objects) readYAML(name string, r *bufio.Reader) error {
	pool := newDecodePool(name)
	splitErr := splitYAMLStream(name, r, pool.submit)
	return o.addUnits(pool.drain(), splitErr)
}

// hasContent reports whether raw has a line that is neither blank nor a
// comment.
func hasContent(raw []byte) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
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

// decoded is one object read, or one warning.
type decoded struct {
	obj     any
	warning string
}

// kinds are the objects the planner reads, by "group/Kind" (the core
// group is ""), each with a constructor for the value to decode into.
var kinds = map[string]func() any{
	"/Pod":                     func() any { return &corev1.Pod{} },
	"/Node":                    func() any { return &corev1.Node{} },
	"apps/DaemonSet":           func() any { return &appsv1.DaemonSet{} },
	"karpenter.sh/NodePool":    func() any { return &karpv1.NodePool{} },
	"karpenter.sh/NodeClaim":   func() any { return &karpv1.NodeClaim{} },
	"karpenter.sh/NodeOverlay": func() any { return &v1alpha1.NodeOverlay{} },
	v1beta1.SchemeGroupVersion.Group + "/AKSNodeClass": func() any { return &v1beta1.AKSNodeClass{} },
	"/PersistentVolume":           func() any { return &corev1.PersistentVolume{} },
	"/PersistentVolumeClaim":      func() any { return &corev1.PersistentVolumeClaim{} },
	"/Namespace":                  func() any { return &corev1.Namespace{} },
	"policy/PodDisruptionBudget":  func() any { return &policyv1.PodDisruptionBudget{} },
	"storage.k8s.io/StorageClass": func() any { return &storagev1.StorageClass{} },
	// CapacityBuffers and what shapes them (plan/buffers.go).
	autoscalingv1beta1.Group + "/CapacityBuffer": func() any { return &autoscalingv1beta1.CapacityBuffer{} },
	"/PodTemplate":     func() any { return &corev1.PodTemplate{} },
	"apps/Deployment":  func() any { return &appsv1.Deployment{} },
	"apps/ReplicaSet":  func() any { return &appsv1.ReplicaSet{} },
	"apps/StatefulSet": func() any { return &appsv1.StatefulSet{} },
}

// decoder is one worker's state: its compactor and the buffer objects
// are pruned into.
type decoder struct {
	compactor snapshot.Compactor
	pruned    []byte
	compact   []byte
	pods      podDecoder
	checker   podChecker
}

// decode appends the objects in one document (or List item) to out,
// compacted by dec's compactor; it touches nothing shared but dec (one per
// worker), so documents decode in parallel.
func decode(out []decoded, dec *decoder, file string, doc, item int, js []byte) ([]decoded, error) {
	fail := func(format string, args ...any) error {
		return &DocumentError{File: file, Document: doc, Item: item, Err: fmt.Errorf(format, args...)}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return out, nil
	}
	meta, js, err := readTypeMeta(dec, js)
	if err != nil {
		return out, fail("%w", err)
	}
	if meta.Kind == "" {
		return out, fail("has no kind; every object needs apiVersion and kind")
	}
	if meta.Kind == "List" || strings.HasSuffix(meta.Kind, "List") && meta.Items != nil {
		if item > 0 {
			return out, fail("a List inside a List is not supported")
		}
		return decodeItems(out, dec, file, doc, meta.Items)
	}
	return appendObject(out, dec, position{file, doc, item}, meta, js, fail)
}

// readTypeMeta reads js's apiVersion, kind and name and, for a kind it
// knows at a glance, prunes what compacting drops anyway, so it is not
// decoded at all; the JSON it returns is compact (js may be indented).
func readTypeMeta(dec *decoder, js []byte) (typeMeta, []byte, error) {
	if pruned, rule, ok := readPruned(dec.pruned[:0], js); ok {
		dec.pruned = pruned
		if meta, ok := quickTypeMeta(pruned); ok && pruneRuleFor(apiGroup(meta.APIVersion), meta.Kind) == rule {
			return meta, pruned, nil
		}
	}
	// The separate passes: compact, read the type, prune.
	dec.compact = appendCompact(dec.compact[:0], js)
	js = dec.compact
	meta, ok := quickTypeMeta(js)
	if ok {
		dec.pruned = prune(dec.pruned[:0], js, pruneRuleFor(apiGroup(meta.APIVersion), meta.Kind))
		return meta, dec.pruned, nil
	}
	if err := json.Unmarshal(js, &meta); err != nil {
		if syntaxErr := (*json.SyntaxError)(nil); errors.As(err, &syntaxErr) {
			return meta, js, fmt.Errorf("not valid JSON (at byte %d of the object): %w", syntaxErr.Offset, err)
		}
		return meta, js, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	return meta, js, nil
}

// appendObject decodes one object the planner uses (or a warning for one
// it does not) and appends it, compacted, to out.
func appendObject(out []decoded, dec *decoder, where position, meta typeMeta, js []byte, fail func(string, ...any) error) ([]decoded, error) {
	objName := meta.Metadata.Name
	if meta.Metadata.Namespace != "" {
		objName = meta.Metadata.Namespace + "/" + objName
	}
	newObject, ok := kinds[apiGroup(meta.APIVersion)+"/"+meta.Kind]
	if !ok {
		return append(out, decoded{warning: fmt.Sprintf("%s: ignoring %s %s (kind %s, apiVersion %s is not used by the planner)",
			where, meta.Kind, objName, meta.Kind, meta.APIVersion)}), nil
	}
	if meta.Kind == "Pod" && apiGroup(meta.APIVersion) == "" {
		if pod, ok := dec.fastPod(js); ok {
			if err := dec.checker.check(pod); err != nil {
				return out, fail("%w", err)
			}
			return append(out, decoded{obj: pod}), nil
		}
	}
	obj := newObject()
	if err := json.Unmarshal(js, obj); err != nil {
		if bad := malformedQuantity(newObject(), js); bad != nil {
			return out, fail("%w", &InvalidError{Kind: meta.Kind, Name: objName, Errs: fieldpath.ErrorList{bad}})
		}
		return out, fail("%s %s: %v", meta.Kind, objName, err)
	}
	if object, ok := obj.(client.Object); ok {
		dec.compactor.Compact(object)
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		if err := dec.checker.check(pod); err != nil {
			return out, fail("%w", err)
		}
	} else if err := validateObject(context.Background(), obj); err != nil {
		return out, fail("%w", err)
	}
	out = append(out, decoded{obj: obj})
	if nodeClass, ok := obj.(*v1beta1.AKSNodeClass); ok {
		if unsupported := unsupportedFields(nodeClass); len(unsupported) > 0 {
			out = append(out, decoded{warning: fmt.Sprintf("%s: AKSNodeClass %s sets %s, which karpfunc does not support yet; the API server would reject it",
				where, nodeClass.Name, strings.Join(unsupported, ", "))})
		}
	}
	return out, nil
}

// fastPod decodes a pod's pruned JSON straight into its compacted form
// (see podDecoder), or says it cannot.
func (dec *decoder) fastPod(js []byte) (*corev1.Pod, bool) {
	dec.pods.compactor = &dec.compactor
	return dec.pods.decode(js)
}

// position is where an object is, for warnings: written only when one
// is (most objects have none).
type position struct {
	file      string
	doc, item int
}

func (p position) String() string {
	where := fmt.Sprintf("%s: document %d", p.file, p.doc)
	if p.item > 0 {
		where += fmt.Sprintf(", item %d", p.item)
	}
	return where
}

// apiGroup is apiVersion's group: "" for the core group ("v1").
func apiGroup(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}

// decodeItems decodes a List's items, numbered from 1.
func decodeItems(out []decoded, dec *decoder, file string, doc int, items []json.RawMessage) ([]decoded, error) {
	for index, raw := range items {
		var err error
		if out, err = decode(out, dec, file, doc, index+1, raw); err != nil {
			return out, err
		}
	}
	return out, nil
}

// addDecoded files one decoded object (or warning) in o.
func (o *Objects) addDecoded(d decoded) {
	switch obj := d.obj.(type) {
	case nil:
		o.Warnings = append(o.Warnings, d.warning)
	case *corev1.Pod:
		o.Pods = append(o.Pods, obj)
	case *corev1.Node:
		o.Nodes = append(o.Nodes, obj)
	case *appsv1.DaemonSet:
		o.DaemonSets = append(o.DaemonSets, obj)
	case *karpv1.NodePool:
		o.NodePools = append(o.NodePools, obj)
	case *karpv1.NodeClaim:
		o.NodeClaims = append(o.NodeClaims, obj)
	case *v1alpha1.NodeOverlay:
		o.NodeOverlays = append(o.NodeOverlays, obj)
	case *v1beta1.AKSNodeClass:
		o.NodeClasses = append(o.NodeClasses, obj)
	case *corev1.PersistentVolume:
		o.PersistentVolumes = append(o.PersistentVolumes, obj)
	case *corev1.PersistentVolumeClaim:
		o.PersistentVolumeClaims = append(o.PersistentVolumeClaims, obj)
	case *corev1.Namespace:
		o.Namespaces = append(o.Namespaces, obj)
	case *policyv1.PodDisruptionBudget:
		o.PodDisruptionBudgets = append(o.PodDisruptionBudgets, obj)
	case *storagev1.StorageClass:
		o.StorageClasses = append(o.StorageClasses, obj)
	default:
		o.addBufferObject(obj)
	}
}

func unsupportedFields(nc *v1beta1.AKSNodeClass) []string {
	return nc.Spec.Refused()
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
