package snapshot

import (
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Sharing pod specs by their bytes: the replicas of a ReplicaSet carry
// the same spec but for nodeName, so a list's decoder decodes a spec
// once and gives every pod whose (wire-filtered) spec bytes, nodeName
// aside, are the same a copy of it with its own nodeName; once the first
// such pod has been compacted (by add), the copies are of the compacted
// spec, so compacting them again finds every part already shared. The
// copy is a value: its slices, maps and pointers are the shared
// (read-only) ones, as compaction leaves them. Labels, annotations and
// owner references are shared by their bytes the same way. Each table is
// bounded by maxSharedSpecs. On a page where no two pods share a
// template, this costs somewhat more allocation (the keys kept) than
// decoding each pod whole (BenchmarkDecodePage/api-shaped measures that
// worst case); where they do, much less.

// podSpecNodeNameField is PodSpec's nodeName (generated.proto).
const podSpecNodeNameField = 10

// ObjectMeta's labels and owner references (annotations: wire.go).
const (
	metaLabelsField          = 11
	metaOwnerReferencesField = 13
)

// sharedMetaFields are the metadata parts shared by their bytes the same
// way, each in a table of its own (a pod's own annotation does not stop
// its labels being shared): a Deployment's pods carry the same labels,
// annotations and owner reference.
var sharedMetaFields = [...]protowire.Number{metaLabelsField, metaAnnotationsField, metaOwnerReferencesField}

// maxSharedSpecs bounds a decoder's table of specs: when full it starts
// over.
const maxSharedSpecs = 4096

// itemDecoder decodes a list's items, keeping scratch buffers and the
// shared pod specs from item to item. The zero value is ready.
type itemDecoder struct {
	filtered, rest, specKey, metaRest []byte
	metaKeys                          [len(sharedMetaFields)][]byte
	specs                             map[string]*corev1.PodSpec
	metas                             [len(sharedMetaFields)]map[string]any
	scratchMeta                       metav1.ObjectMeta
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
	if err := d.shareMeta(&pod.ObjectMeta); err != nil {
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
	specs, metadatas := 0, 0
	err := eachRawField(filtered, func(num protowire.Number, typ protowire.Type, raw, value []byte) error {
		switch {
		case num == objectSpecField && typ == protowire.BytesType:
			specs++
			spec = value
		case num == objectMetadataField && typ == protowire.BytesType:
			metadatas++
			return d.splitMeta(value)
		default:
			d.rest = append(d.rest, raw...)
		}
		return nil
	})
	if err != nil || specs != 1 || metadatas != 1 {
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

// splitMeta appends a pod's metadata to d.rest without the shared parts,
// whose fields go to d.metaKeys.
func (d *itemDecoder) splitMeta(metadata []byte) error {
	d.metaRest = d.metaRest[:0]
	for i := range d.metaKeys {
		d.metaKeys[i] = d.metaKeys[i][:0]
	}
	err := eachRawField(metadata, func(num protowire.Number, _ protowire.Type, raw, _ []byte) error {
		for i, shared := range sharedMetaFields {
			if num == shared {
				d.metaKeys[i] = append(d.metaKeys[i], raw...)
				return nil
			}
		}
		d.metaRest = append(d.metaRest, raw...)
		return nil
	})
	d.rest = protowire.AppendTag(d.rest, objectMetadataField, protowire.BytesType)
	d.rest = protowire.AppendBytes(d.rest, d.metaRest)
	return err
}

// shareMeta sets meta's shared parts from d.metaKeys: the values decoded
// for the same bytes before, or decoded now.
func (d *itemDecoder) shareMeta(meta *metav1.ObjectMeta) error {
	for i, key := range d.metaKeys {
		if len(key) == 0 {
			continue
		}
		part, found := d.metas[i][string(key)]
		if !found {
			d.scratchMeta = metav1.ObjectMeta{}
			if err := d.scratchMeta.Unmarshal(key); err != nil {
				return err
			}
			part = metaPart(&d.scratchMeta, sharedMetaFields[i])
			if d.metas[i] == nil || len(d.metas[i]) >= maxSharedSpecs {
				d.metas[i] = make(map[string]any, 256)
			}
			d.metas[i][string(key)] = part
		}
		setMetaPart(meta, part)
	}
	return nil
}

// metaPart is the part of meta numbered num in sharedMetaFields.
func metaPart(meta *metav1.ObjectMeta, num protowire.Number) any {
	switch num {
	case metaLabelsField:
		return labelsPart(meta.Labels)
	case metaAnnotationsField:
		return annotationsPart(meta.Annotations)
	}
	return meta.OwnerReferences
}

// labelsPart and annotationsPart tell the two maps apart in a table.
type (
	labelsPart      map[string]string
	annotationsPart map[string]string
)

// setMetaPart sets a shared part on meta.
func setMetaPart(meta *metav1.ObjectMeta, part any) {
	switch typed := part.(type) {
	case labelsPart:
		meta.Labels = typed
	case annotationsPart:
		meta.Annotations = typed
	case []metav1.OwnerReference:
		meta.OwnerReferences = typed
	}
}
