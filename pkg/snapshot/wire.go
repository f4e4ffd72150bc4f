package snapshot

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Skipping at the wire what Compact drops: PageReader filters each pod's
// and node's protobuf before the generated Unmarshal, so the fields
// Compact would throw away are never decoded (no allocation, nothing for
// GC to mark). The rules below mirror compact.go field by field: where
// Compact builds a value anew from a few fields (a container, a container
// status) only those are kept (an allow list, so a field added to the API
// later is dropped as Compact drops it); where Compact clears named
// fields (the pod's spec and status, metadata) only those are dropped.
// Invariant, tested on API-server-shaped objects (TestWireFilterKeepsCompact):
// Compact(Unmarshal(filtered)) equals Compact(Unmarshal(whole)).

// Field numbers from k8s.io/api/core/v1/generated.proto and
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto (v0.37.2).
const (
	// Every top-level object (Pod, Node).
	objectMetadataField = 1
	objectSpecField     = 2
	objectStatusField   = 3

	// ObjectMeta.
	metaNameField         = 1
	metaGenerateNameField = 2
	metaNamespaceField    = 3
	metaAnnotationsField  = 12
	managedFieldsField    = 17

	// A map<string, ...> entry.
	mapEntryKeyField = 1

	// PodSpec.
	podSpecVolumesField                  = 1
	podSpecContainersField               = 2
	podSpecDNSPolicyField                = 6
	podSpecServiceAccountNameField       = 8
	podSpecDeprecatedServiceAccountField = 9
	podSpecSecurityContextField          = 14
	podSpecImagePullSecretsField         = 15
	podSpecHostnameField                 = 16
	podSpecSubdomainField                = 17
	podSpecInitContainersField           = 20
	podSpecHostAliasesField              = 23
	podSpecDNSConfigField                = 26
	podSpecEphemeralContainersField      = 34

	// Container.
	containerNameField          = 1
	containerPortsField         = 6
	containerResourcesField     = 8
	containerResizePolicyField  = 23
	containerRestartPolicyField = 24

	// ContainerPort.
	containerPortHostPortField = 2

	// Volume and its inlined VolumeSource.
	volumeSourceField          = 2
	volumeSourcePVCField       = 10
	volumeSourceEphemeralField = 29

	// PodStatus.
	podStatusConditionsField                 = 2
	podStatusHostIPField                     = 5
	podStatusPodIPField                      = 6
	podStatusContainerStatusesField          = 8
	podStatusQOSClassField                   = 9
	podStatusInitContainerStatusesField      = 10
	podStatusPodIPsField                     = 12
	podStatusEphemeralContainerStatusesField = 13
	podStatusHostIPsField                    = 16

	// PodCondition.
	podConditionTypeField = 1

	// ContainerStatus.
	containerStatusNameField               = 1
	containerStatusAllocatedResourcesField = 10
	containerStatusResourcesField          = 11

	// NodeStatus.
	nodeStatusImagesField = 8
)

// fieldRule is what the filter does with one field of a message. The zero
// value keeps the field as it is.
type fieldRule struct {
	drop bool
	// inner filters the field's value (each element of a repeated field),
	// a message of its own.
	inner *messageRule
	// keepIf keeps an element only when it says so.
	keepIf func(value []byte) (bool, error)
	// keepAllIf keeps the field's elements only when it says so of one of
	// them; else none.
	keepAllIf func(value []byte) (bool, error)
}

// messageRule is what the filter keeps of a message.
type messageRule struct {
	// byNumber holds the rules by field number; a field without one is
	// kept, or dropped when onlyListed.
	byNumber   []*fieldRule
	onlyListed bool
	// anyAll: some rule has keepAllIf (the message is looked through once
	// more before it is filtered).
	anyAll bool
}

func newMessageRule(onlyListed bool, fields map[protowire.Number]fieldRule) *messageRule {
	rule := &messageRule{onlyListed: onlyListed}
	for num := range fields {
		rule.byNumber = append(rule.byNumber, make([]*fieldRule, max(0, int(num)+1-len(rule.byNumber)))...)
	}
	for num, field := range fields {
		if field.keepAllIf != nil && num >= 64 {
			panic(fmt.Sprintf("snapshot: keepAllIf on field %d, over 63", num))
		}
		rule.byNumber[num] = &field
		rule.anyAll = rule.anyAll || field.keepAllIf != nil
	}
	return rule
}

var (
	dropField = fieldRule{drop: true}
	keepField = fieldRule{}
)

// objectMetaRule: Compact drops every object's managedFields and kubectl's
// last-applied annotation.
func objectMetaRule(extra map[protowire.Number]fieldRule) *messageRule {
	fields := map[protowire.Number]fieldRule{
		managedFieldsField:   dropField,
		metaAnnotationsField: {keepIf: notLastApplied},
	}
	for num, field := range extra {
		fields[num] = field
	}
	return newMessageRule(false, fields)
}

// containerRule keeps what compactContainer keeps.
var containerRule = newMessageRule(true, map[protowire.Number]fieldRule{
	containerNameField:          keepField,
	containerPortsField:         {keepIf: hasHostPort},
	containerResourcesField:     keepField,
	containerResizePolicyField:  keepField,
	containerRestartPolicyField: keepField,
})

// containerStatusRule keeps what resourceStatuses keeps.
var containerStatusRule = newMessageRule(true, map[protowire.Number]fieldRule{
	containerStatusNameField:               keepField,
	containerStatusAllocatedResourcesField: keepField,
	containerStatusResourcesField:          keepField,
})

// podSpecRule drops what compactPodSpec clears.
var podSpecRule = newMessageRule(false, map[protowire.Number]fieldRule{
	podSpecVolumesField:                  {keepIf: isClaimVolume},
	podSpecContainersField:               {inner: containerRule},
	podSpecInitContainersField:           {inner: containerRule},
	podSpecEphemeralContainersField:      dropField,
	podSpecImagePullSecretsField:         dropField,
	podSpecSecurityContextField:          dropField,
	podSpecDNSPolicyField:                dropField,
	podSpecDNSConfigField:                dropField,
	podSpecServiceAccountNameField:       dropField,
	podSpecDeprecatedServiceAccountField: dropField,
	podSpecHostnameField:                 dropField,
	podSpecSubdomainField:                dropField,
	podSpecHostAliasesField:              dropField,
})

// podStatusRule drops what compactPodStatus clears.
var podStatusRule = newMessageRule(false, map[protowire.Number]fieldRule{
	podStatusConditionsField:                 {keepIf: isReadCondition},
	podStatusContainerStatusesField:          {inner: containerStatusRule, keepAllIf: reportsResources},
	podStatusInitContainerStatusesField:      {inner: containerStatusRule, keepAllIf: reportsResources},
	podStatusEphemeralContainerStatusesField: dropField,
	podStatusHostIPField:                     dropField,
	podStatusHostIPsField:                    dropField,
	podStatusPodIPField:                      dropField,
	podStatusPodIPsField:                     dropField,
	podStatusQOSClassField:                   dropField,
})

// podWireRule is what decoding keeps of a pod.
var podWireRule = newMessageRule(false, map[protowire.Number]fieldRule{
	objectMetadataField: {inner: objectMetaRule(map[protowire.Number]fieldRule{metaGenerateNameField: dropField})},
	objectSpecField:     {inner: podSpecRule},
	objectStatusField:   {inner: podStatusRule},
})

// nodeWireRule is what decoding keeps of a node: all but managedFields,
// the last-applied annotation and the image list.
var nodeWireRule = newMessageRule(false, map[protowire.Number]fieldRule{
	objectMetadataField: {inner: objectMetaRule(nil)},
	objectStatusField:   {inner: newMessageRule(false, map[protowire.Number]fieldRule{nodeStatusImagesField: dropField})},
})

// notLastApplied: an annotation other than kubectl's last-applied one.
func notLastApplied(entry []byte) (bool, error) {
	key, found, err := lastBytesField(entry, mapEntryKeyField)
	return !found || string(key) != lastApplied, err
}

// hasHostPort: a container port with a host port (compactContainer keeps
// only those).
func hasHostPort(port []byte) (bool, error) {
	hostPort, _, err := lastVarintField(port, containerPortHostPortField)
	return int32(hostPort) > 0, err //nolint:gosec // int32 on the wire: a negative one is sign-extended
}

// isClaimVolume: a volume with a PersistentVolumeClaim or an ephemeral
// claim (claimVolumes keeps only those).
func isClaimVolume(volume []byte) (bool, error) {
	claim := false
	err := eachRawField(volume, func(num protowire.Number, typ protowire.Type, _, source []byte) error {
		if num != volumeSourceField || typ != protowire.BytesType {
			return nil
		}
		found, err := hasAnyField(source, volumeSourcePVCField, volumeSourceEphemeralField)
		claim = claim || found
		return err
	})
	return claim, err
}

// isReadCondition: PodScheduled or PodResizePending (readConditions).
func isReadCondition(condition []byte) (bool, error) {
	conditionType, _, err := lastBytesField(condition, podConditionTypeField)
	return string(conditionType) == "PodScheduled" || string(conditionType) == "PodResizePending", err
}

// reportsResources: a container status with resources or allocated
// resources (resourceStatuses keeps the list only if one has).
func reportsResources(status []byte) (bool, error) {
	return hasAnyField(status, containerStatusAllocatedResourcesField, containerStatusResourcesField)
}

// lastBytesField is the value of the last occurrence of a length-delimited
// field (the one Unmarshal keeps).
func lastBytesField(msg []byte, want protowire.Number) (value []byte, found bool, err error) {
	err = eachRawField(msg, func(num protowire.Number, typ protowire.Type, _, field []byte) error {
		if num == want && typ == protowire.BytesType {
			value, found = field, true
		}
		return nil
	})
	return value, found, err
}

// lastVarintField is the value of the last occurrence of a varint field.
func lastVarintField(msg []byte, want protowire.Number) (value uint64, found bool, err error) {
	err = eachRawField(msg, func(num protowire.Number, typ protowire.Type, raw, _ []byte) error {
		if num != want || typ != protowire.VarintType {
			return nil
		}
		_, _, tagLen := protowire.ConsumeTag(raw)
		value, _ = protowire.ConsumeVarint(raw[tagLen:])
		found = true
		return nil
	})
	return value, found, err
}

// hasAnyField: msg holds one of the fields.
func hasAnyField(msg []byte, nums ...protowire.Number) (bool, error) {
	found := false
	err := eachRawField(msg, func(num protowire.Number, _ protowire.Type, _, _ []byte) error {
		for _, want := range nums {
			found = found || num == want
		}
		return nil
	})
	return found, err
}

// errWireType: a field the filter looks into is not length-delimited.
var errWireType = errors.New("a message field that is not length-delimited")

// filterMessage appends to out the fields of msg that rule keeps, each
// filtered by its own rule.
func filterMessage(rule *messageRule, msg, out []byte) ([]byte, error) {
	droppedLists, err := listsDropped(rule, msg)
	if err != nil {
		return out, err
	}
	err = eachRawField(msg, func(num protowire.Number, typ protowire.Type, raw, value []byte) error {
		field := rule.lookup(num)
		if field == nil || field.drop || (num < 64 && droppedLists&(1<<num) != 0) {
			return nil
		}
		out, err = filterField(field, num, typ, raw, value, out)
		return err
	})
	return out, err
}

// lookup is the rule of field num; nil when the field is dropped.
func (r *messageRule) lookup(num protowire.Number) *fieldRule {
	if int(num) < len(r.byNumber) && r.byNumber[num] != nil {
		return r.byNumber[num]
	}
	if r.onlyListed {
		return nil
	}
	return &keepField
}

// listsDropped are the repeated fields of msg whose keepAllIf said no of
// every element, as a set of field numbers (keepAllIf is only on fields
// numbered under 64: newMessageRule checks).
func listsDropped(rule *messageRule, msg []byte) (uint64, error) {
	if !rule.anyAll {
		return 0, nil
	}
	var seen, kept uint64
	err := eachRawField(msg, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		field := rule.lookup(num)
		if field == nil || field.keepAllIf == nil || typ != protowire.BytesType {
			return nil
		}
		seen |= 1 << num
		ok, err := field.keepAllIf(value)
		if ok {
			kept |= 1 << num
		}
		return err
	})
	return seen &^ kept, err
}

// filterField appends one field of a message as its rule says.
func filterField(field *fieldRule, num protowire.Number, typ protowire.Type, raw, value []byte, out []byte) ([]byte, error) {
	if field.inner == nil && field.keepIf == nil {
		return append(out, raw...), nil
	}
	if typ != protowire.BytesType {
		return out, fmt.Errorf("field %d: %w", num, errWireType)
	}
	if field.keepIf != nil {
		keep, err := field.keepIf(value)
		if err != nil || !keep {
			return out, wrapField(num, err)
		}
	}
	if field.inner == nil {
		return append(out, raw...), nil
	}
	out = protowire.AppendTag(out, num, typ)
	return appendFiltered(field.inner, value, out, num)
}

// appendFiltered appends value filtered by rule, length-prefixed: the
// filtered bytes go first, then move up behind their length.
func appendFiltered(rule *messageRule, value, out []byte, num protowire.Number) ([]byte, error) {
	start := len(out)
	out, err := filterMessage(rule, value, out)
	if err != nil {
		return out, wrapField(num, err)
	}
	size := len(out) - start
	prefix := protowire.SizeVarint(uint64(size))
	out = append(out, make([]byte, prefix)...)
	copy(out[start+prefix:], out[start:start+size])
	protowire.AppendVarint(out[start:start], uint64(size))
	return out, nil
}

func wrapField(num protowire.Number, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("field %d: %w", num, err)
}

// objectName is "namespace/name" (or "name") read from an object's
// metadata, for an error about an object that did not decode; "" when
// its metadata cannot be read. A field found before the protobuf breaks
// is taken.
func objectName(object []byte) string {
	metadata, _, _ := lastBytesField(object, objectMetadataField)
	name, _, _ := lastBytesField(metadata, metaNameField)
	namespace, _, _ := lastBytesField(metadata, metaNamespaceField)
	switch {
	case len(name) == 0:
		return ""
	case len(namespace) == 0:
		return string(name)
	}
	return string(namespace) + "/" + string(name)
}
