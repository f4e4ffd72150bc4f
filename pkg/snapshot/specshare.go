package snapshot

import (
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Sharing pod specs by their bytes: the replicas of a ReplicaSet carry
// the same spec but for nodeName, so a list's decoder decodes a spec
// once and gives every pod whose (wire-filtered) spec bytes, nodeName
// aside, are the same a copy of it with its own nodeName; once the first
// such pod has been compacted (by add), the copies are of the compacted
// spec, so compacting them again finds every part already shared. The
// copy is a value: its slices, maps and pointers are the shared
// (read-only) ones, as compaction leaves them. Bounded by maxSharedSpecs.

// podSpecNodeNameField is PodSpec's nodeName (generated.proto).
const podSpecNodeNameField = 10

// maxSharedSpecs bounds a decoder's table of specs: when full it starts
// over.
const maxSharedSpecs = 4096

// itemDecoder decodes a list's items, keeping scratch buffers and the
// shared pod specs from item to item. The zero value is ready.
type itemDecoder struct {
	filtered, rest, specKey []byte
	specs                   map[string]*corev1.PodSpec
}

// decodedItem is an item decoded and, for a pod whose spec was decoded
// for it, the spec's key (remember stores its compacted spec).
type decodedItem struct {
	object  client.Object
	specKey string
}

// decode filters an item's protobuf by kind's wire rule and decodes what
// is left; a pod's spec is shared when seen before.
func (d *itemDecoder) decode(kind *protoKind, field []byte) (decodedItem, error) {
	filtered, err := filterMessage(kind.wire, field, d.filtered[:0])
	d.filtered = filtered
	if err != nil {
		return decodedItem{}, err
	}
	if kind == podsProto {
		if item, ok, err := d.decodePod(filtered); ok || err != nil {
			return item, err
		}
	}
	item := kind.newItem()
	if err := item.Unmarshal(filtered); err != nil {
		return decodedItem{}, err
	}
	return decodedItem{object: item}, nil
}

// decodePod decodes a pod with a shared spec; ok is false when its bytes
// are not the shape sharing takes (no spec, or more than one), and the
// pod is decoded whole instead.
func (d *itemDecoder) decodePod(filtered []byte) (item decodedItem, ok bool, err error) {
	spec, nodeName, ok := d.splitPod(filtered)
	if !ok {
		return decodedItem{}, false, nil
	}
	pod := &corev1.Pod{}
	if err := pod.Unmarshal(d.rest); err != nil {
		return decodedItem{}, true, err
	}
	shared, found := d.specs[string(spec)]
	if !found {
		shared = &corev1.PodSpec{}
		if err := shared.Unmarshal(spec); err != nil {
			return decodedItem{}, true, err
		}
		item.specKey = string(spec)
	}
	pod.Spec = *shared
	pod.Spec.NodeName = nodeName
	item.object = pod
	return item, true, nil
}

// splitPod puts a filtered pod's fields but its spec into d.rest and its
// spec's fields but nodeName into d.specKey; false when the pod has no
// spec or several, or the spec cannot be split.
func (d *itemDecoder) splitPod(filtered []byte) (spec []byte, nodeName string, ok bool) {
	d.rest = d.rest[:0]
	specs := 0
	err := eachRawField(filtered, func(num protowire.Number, typ protowire.Type, raw, value []byte) error {
		if num == objectSpecField && typ == protowire.BytesType {
			specs++
			spec = value
			return nil
		}
		d.rest = append(d.rest, raw...)
		return nil
	})
	if err != nil || specs != 1 {
		return nil, "", false
	}
	d.specKey = d.specKey[:0]
	nodeNames := 0
	err = eachRawField(spec, func(num protowire.Number, typ protowire.Type, raw, value []byte) error {
		if num == podSpecNodeNameField && typ == protowire.BytesType {
			nodeNames++
			nodeName = string(value)
			return nil
		}
		d.specKey = append(d.specKey, raw...)
		return nil
	})
	return d.specKey, nodeName, err == nil && nodeNames <= 1
}

// remember stores, for a pod whose spec was decoded for it, its spec as
// add left it (compacted, in the cache), nodeName aside.
func (d *itemDecoder) remember(item decodedItem) {
	pod, ok := item.object.(*corev1.Pod)
	if !ok || item.specKey == "" {
		return
	}
	if d.specs == nil || len(d.specs) >= maxSharedSpecs {
		d.specs = make(map[string]*corev1.PodSpec, 256)
	}
	spec := pod.Spec
	spec.NodeName = ""
	d.specs[item.specKey] = &spec
}
