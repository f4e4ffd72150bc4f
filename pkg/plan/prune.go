package plan

import (
	"bytes"
	"slices"
)

// Pruning copies an object's compact JSON without the fields that
// compacting (snapshot.Compactor.Compact) drops anyway, so that they are
// never decoded: managedFields and kubectl's last-applied annotation on
// every kind, and on pods the containers' env, image, probes and mounts,
// the volumes without a claim, the container statuses' states and the
// status's IPs. A rule only drops what Compact drops; whatever it keeps
// of a pod is decoded and compacted as the unpruned object would be, so the
// compacted object is the same (TestPruneKeepsCompacted, TestPruneKeepsPlan).
//
// Keys are matched as encoding/json matches field names: a keep list keeps
// every key that may fold to one of its names (and any escaped or
// non-ASCII key); a drop list drops only exact names (any other spelling
// is decoded and then compacted away). Input that is not compact JSON
// is returned unpruned.

// pruneRule says what of one JSON object is copied.
type pruneRule struct {
	// keep, when set, are the only fields copied.
	keep []string
	// drop are fields never copied.
	drop []string
	// objects and arrays are the rules for object fields and for the
	// elements of array fields.
	objects map[string]*pruneRule
	arrays  map[string]*pruneRule
	// withKey, when set, copies an array's object elements only when
	// they have one of these fields.
	withKey []string
	// typeIn, when set, copies an array's object elements only when
	// their "type" is one of these (or cannot be read plainly).
	typeIn []string
	// absentWhenEmptied: a field this rule emptied is left out, as
	// Compact sets a map it emptied to nil.
	absentWhenEmptied bool
}

// annotationsRule drops kubectl's copy of the object (Compact drops it).
var annotationsRule = &pruneRule{drop: []string{"kubectl.kubernetes.io/last-applied-configuration"}, absentWhenEmptied: true}

// objectRule is what every kind loses to Compact.
var objectRule = &pruneRule{objects: map[string]*pruneRule{
	"metadata": {drop: []string{"managedFields"}, objects: map[string]*pruneRule{"annotations": annotationsRule}},
}}

// nodeRule: Compact drops a node's image list.
var nodeRule = &pruneRule{objects: map[string]*pruneRule{
	"metadata": objectRule.objects["metadata"],
	"status":   {drop: []string{"images"}},
}}

// containerRule keeps what snapshot's compactContainer keeps.
var containerRule = &pruneRule{keep: []string{"name", "resources", "restartPolicy", "resizePolicy", "ports"}}

// containerStatusRule keeps what snapshot's resourceStatuses keeps.
var containerStatusRule = &pruneRule{keep: []string{"name", "resources", "allocatedResources"}}

// podRule mirrors snapshot's compactPod, compactPodSpec and
// compactPodStatus.
var podRule = &pruneRule{objects: map[string]*pruneRule{
	"metadata": {drop: []string{"managedFields", "generateName"}, objects: map[string]*pruneRule{"annotations": annotationsRule}},
	"spec": {
		drop: []string{"ephemeralContainers", "imagePullSecrets", "securityContext", "dnsPolicy", "dnsConfig",
			"serviceAccountName", "serviceAccount", "hostname", "subdomain", "hostAliases"},
		arrays: map[string]*pruneRule{
			"containers":     containerRule,
			"initContainers": containerRule,
			"volumes":        {withKey: []string{"persistentVolumeClaim", "ephemeral"}},
		},
	},
	"status": {
		drop: []string{"ephemeralContainerStatuses", "hostIP", "hostIPs", "podIP", "podIPs", "qosClass"},
		arrays: map[string]*pruneRule{
			"containerStatuses": containerStatusRule, "initContainerStatuses": containerStatusRule,
			// snapshot's readConditions keeps these two.
			"conditions": {typeIn: []string{"PodScheduled", "PodResizePending"}},
		},
	},
}}

// pruneRuleFor is the rule for an object of kind in group.
func pruneRuleFor(group, kind string) *pruneRule {
	switch {
	case group == "" && kind == "Pod":
		return podRule
	case group == "" && kind == "Node":
		return nodeRule
	}
	return objectRule
}

// prune appends js, pruned by rule, to dst; js itself when it is not
// compact JSON.
func prune(dst, js []byte, rule *pruneRule) []byte {
	pruned, _, ok := rule.appendObject(dst, js)
	if !ok {
		return append(dst, js...)
	}
	return pruned
}

// copies reports whether the field key is copied.
func (r *pruneRule) copies(key []byte) bool {
	if r.keep != nil {
		return folds(key, r.keep...)
	}
	for _, name := range r.drop {
		if string(key) == name {
			return false
		}
	}
	return true
}

// appendObject appends the compact JSON object js, pruned, to dst; it
// says how many of its fields were left out.
func (r *pruneRule) appendObject(dst, js []byte) ([]byte, int, bool) {
	dst = append(dst, '{')
	left, written := 0, 0
	ok := objectFields(js, func(key, val []byte) bool {
		if !r.copies(key) {
			left++
			return true
		}
		fieldStart := len(dst)
		if written > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		var emptied, ok bool
		dst, emptied, ok = r.appendField(dst, string(key), val)
		if emptied {
			dst = dst[:fieldStart]
			left++
			return ok
		}
		written++
		return ok
	})
	return append(dst, '}'), left, ok
}

// appendField appends the value of the field key, pruned by the rule for
// it; emptied when the field is to be left out.
func (r *pruneRule) appendField(dst []byte, key string, val []byte) ([]byte, bool, bool) {
	if sub := r.objects[key]; sub != nil && len(val) > 0 && val[0] == '{' {
		out, left, ok := sub.appendObject(dst, val)
		emptied := sub.absentWhenEmptied && left > 0 && bytes.HasSuffix(out, []byte("{}"))
		return out, emptied, ok
	}
	if sub := r.arrays[key]; sub != nil && len(val) > 0 && val[0] == '[' {
		out, ok := sub.appendElements(dst, val)
		return out, false, ok
	}
	return append(dst, val...), false, true
}

// appendElements appends the compact JSON array js with its object
// elements pruned by r (or left out, by withKey).
func (r *pruneRule) appendElements(dst, js []byte) ([]byte, bool) {
	dst = append(dst, '[')
	written := 0
	ok := arrayElements(js, func(elem []byte) bool {
		if len(elem) == 0 || elem[0] != '{' {
			dst = appendElement(dst, written, elem)
			written++
			return true
		}
		if r.withKey != nil || r.typeIn != nil {
			if r.withKey != nil && !hasField(elem, r.withKey) || r.typeIn != nil && !typeAmong(elem, r.typeIn) {
				return true
			}
			dst = appendElement(dst, written, elem)
			written++
			return true
		}
		if written > 0 {
			dst = append(dst, ',')
		}
		written++
		var ok bool
		dst, _, ok = r.appendObject(dst, elem)
		return ok
	})
	return append(dst, ']'), ok
}

func appendElement(dst []byte, index int, elem []byte) []byte {
	if index > 0 {
		dst = append(dst, ',')
	}
	return append(dst, elem...)
}

// hasField reports whether the compact JSON object js has a field that
// may be one of names; true when js cannot be read (it is kept).
func hasField(js []byte, names []string) bool {
	found := false
	ok := objectFields(js, func(key, _ []byte) bool {
		found = found || folds(key, names...)
		return true
	})
	return found || !ok
}

// typeAmong reports whether the compact JSON object js has a "type"
// that is one of types; true when that cannot be told for sure (a key
// that may fold to "type", a value that is not a plain string), so that
// the element is kept.
func typeAmong(js []byte, types []string) bool {
	keep := false
	ok := objectFields(js, func(key, val []byte) bool {
		if string(key) == "type" {
			typ, plain := plainString(val)
			keep = keep || !plain || slices.Contains(types, typ)
			return true
		}
		keep = keep || folds(key, "type")
		return true
	})
	return keep || !ok
}

// arrayElements calls f with each element of the compact JSON array js,
// stopping when f says so; false when js is not such an array or f
// stopped.
func arrayElements(js []byte, f func(elem []byte) bool) bool {
	if len(js) < 2 || js[0] != '[' || js[len(js)-1] != ']' {
		return false
	}
	if len(js) == 2 {
		return true
	}
	for i := 1; ; {
		end := skip(js, i)
		if end <= i || end >= len(js) {
			return false
		}
		if !f(js[i:end]) {
			return false
		}
		switch js[end] {
		case ',':
			i = end + 1
		case ']':
			return end == len(js)-1
		default:
			return false
		}
	}
}
