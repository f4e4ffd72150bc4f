package plan

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// A pod's pruned JSON is decoded straight into its compact form, without
// encoding/json's reflection over the whole object and without compacting
// it afterwards: most of a dump is pods, and the replicas of a workload
// carry the same labels, containers, tolerations and volumes, byte for
// byte. So each such part is decoded (by encoding/json) and compacted
// once per worker, and a pod whose part has the same bytes takes the
// compacted value again; identity, times and scheduling scalars are read
// directly; the remaining fields of a level (rare ones Compact does not
// touch) are decoded together by encoding/json into that level.
//
// Invariant: when podDecoder.decode answers, its pod equals what
// json.Unmarshal into a corev1.Pod and snapshot.Compactor.Compact make of
// the same bytes (TestFastPodMatchesSlow). It gives up, and the caller
// takes that slow path, on anything else: a key it does not list (another
// spelling encoding/json would fold, a field Compact drops that pruning
// left, an unknown field), a part given twice (encoding/json would merge
// the two), a value that is not plain (escapes, null where a level is
// expected, numbers that are not plain integers) and any decoding error,
// so errors keep encoding/json's words.

// podDecoder is one worker's state for decoding pods; not safe for
// concurrent use.
type podDecoder struct {
	compactor *snapshot.Compactor
	// parts are compacted parts by tag and raw JSON.
	parts map[string]any
	key   []byte
	// batch gathers a level's remaining fields as one JSON object.
	batch []byte
	// seen are the tags of the parts the pod being decoded has set.
	seen []string
}

// maxParts bounds a worker's table of parts; it starts over when full.
const maxParts = 1 << 16

// fieldSetter decodes one field's value into pod; false sends the whole
// pod the slow way.
type fieldSetter func(d *podDecoder, pod *corev1.Pod, val []byte) bool

// decode returns the compacted pod of js (pruned compact JSON), or false.
func (d *podDecoder) decode(js []byte) (*corev1.Pod, bool) {
	pod := &corev1.Pod{}
	d.seen = d.seen[:0]
	if !d.fields(pod, js, podFields) {
		return nil, false
	}
	return pod, true
}

// fields sets pod's fields from the object js by table.
func (d *podDecoder) fields(pod *corev1.Pod, js []byte, table map[string]fieldSetter) bool {
	return objectFields(js, func(key, val []byte) bool {
		set, ok := table[string(key)]
		return ok && set(d, pod, val)
	})
}

// level sets the fields of one nested object of pod (metadata, spec,
// status) by table; the batched ones are decoded into target at the end.
func (d *podDecoder) level(pod *corev1.Pod, js []byte, table map[string]fieldSetter, target any) bool {
	d.batch = append(d.batch[:0], '{')
	if !d.fields(pod, js, table) {
		return false
	}
	if len(d.batch) == 1 {
		return true
	}
	d.batch[len(d.batch)-1] = '}'
	return json.Unmarshal(d.batch, target) == nil
}

// batchedAs leaves the field key to encoding/json.
func batchedAs(key string) fieldSetter {
	quoted := strconv.Quote(key)
	return func(d *podDecoder, _ *corev1.Pod, val []byte) bool {
		d.batch = append(d.batch, quoted...)
		d.batch = append(d.batch, ':')
		d.batch = append(d.batch, val...)
		d.batch = append(d.batch, ',')
		return true
	}
}

var podFields = map[string]fieldSetter{
	"kind":       stringField(func(p *corev1.Pod, s string) { p.Kind = s }),
	"apiVersion": stringField(func(p *corev1.Pod, s string) { p.APIVersion = s }),
	"metadata": func(d *podDecoder, pod *corev1.Pod, val []byte) bool {
		return d.level(pod, val, metadataFields, &pod.ObjectMeta)
	},
	"spec": func(d *podDecoder, pod *corev1.Pod, val []byte) bool {
		return d.level(pod, val, specFields, &pod.Spec)
	},
	"status": func(d *podDecoder, pod *corev1.Pod, val []byte) bool {
		return d.level(pod, val, statusFields, &pod.Status)
	},
}

var metadataFields = withBatched(map[string]fieldSetter{
	"name":              stringField(func(p *corev1.Pod, s string) { p.Name = s }),
	"namespace":         stringField(func(p *corev1.Pod, s string) { p.Namespace = s }),
	"uid":               stringField(func(p *corev1.Pod, s string) { p.UID = types.UID(s) }),
	"resourceVersion":   stringField(func(p *corev1.Pod, s string) { p.ResourceVersion = s }),
	"creationTimestamp": timeField(func(p *corev1.Pod) *metav1.Time { return &p.CreationTimestamp }),
	"labels":            sharedPart("l", func(p *corev1.Pod) *map[string]string { return &p.Labels }),
	"annotations":       sharedPart("a", func(p *corev1.Pod) *map[string]string { return &p.Annotations }),
	"ownerReferences":   sharedPart("o", func(p *corev1.Pod) *[]metav1.OwnerReference { return &p.OwnerReferences }),
	"finalizers":        sharedPart("f", func(p *corev1.Pod) *[]string { return &p.Finalizers }),
}, "selfLink", "generation", "deletionTimestamp", "deletionGracePeriodSeconds", "clusterName")

var specFields = withBatched(map[string]fieldSetter{
	"nodeName":                      stringField(func(p *corev1.Pod, s string) { p.Spec.NodeName = s }),
	"schedulerName":                 internedField(func(p *corev1.Pod, s string) { p.Spec.SchedulerName = s }),
	"priorityClassName":             internedField(func(p *corev1.Pod, s string) { p.Spec.PriorityClassName = s }),
	"restartPolicy":                 stringField(func(p *corev1.Pod, s string) { p.Spec.RestartPolicy = corev1.RestartPolicy(s) }),
	"preemptionPolicy":              stringField(func(p *corev1.Pod, s string) { p.Spec.PreemptionPolicy = ptrTo(corev1.PreemptionPolicy(s)) }),
	"priority":                      intPointerField(32, func(p *corev1.Pod, n int64) { p.Spec.Priority = ptrTo(int32(n)) }),
	"terminationGracePeriodSeconds": intPointerField(64, func(p *corev1.Pod, n int64) { p.Spec.TerminationGracePeriodSeconds = ptrTo(n) }),
	"enableServiceLinks":            boolField(func(p *corev1.Pod, b bool) { p.Spec.EnableServiceLinks = ptrTo(b) }),
	"containers":                    sharedPart("c", func(p *corev1.Pod) *[]corev1.Container { return &p.Spec.Containers }),
	"initContainers":                sharedPart("i", func(p *corev1.Pod) *[]corev1.Container { return &p.Spec.InitContainers }),
	"volumes":                       sharedPart("v", func(p *corev1.Pod) *[]corev1.Volume { return &p.Spec.Volumes }),
	"nodeSelector":                  sharedPart("s", func(p *corev1.Pod) *map[string]string { return &p.Spec.NodeSelector }),
	"tolerations":                   sharedPart("t", func(p *corev1.Pod) *[]corev1.Toleration { return &p.Spec.Tolerations }),
	"affinity":                      sharedPart("A", func(p *corev1.Pod) **corev1.Affinity { return &p.Spec.Affinity }),
	"topologySpreadConstraints": sharedPart("T", func(p *corev1.Pod) *[]corev1.TopologySpreadConstraint {
		return &p.Spec.TopologySpreadConstraints
	}),
}, "activeDeadlineSeconds", "automountServiceAccountToken", "hostNetwork", "hostPID", "hostIPC",
	"shareProcessNamespace", "readinessGates", "runtimeClassName", "overhead", "setHostnameAsFQDN", "os",
	"hostUsers", "schedulingGates", "resourceClaims", "resources", "hostnameOverride", "workloadRef",
	"schedulingGroup", "evictionResponders")

var statusFields = withBatched(map[string]fieldSetter{
	"phase":             stringField(func(p *corev1.Pod, s string) { p.Status.Phase = corev1.PodPhase(s) }),
	"nominatedNodeName": stringField(func(p *corev1.Pod, s string) { p.Status.NominatedNodeName = s }),
	"startTime":         timePointerField(func(p *corev1.Pod) **metav1.Time { return &p.Status.StartTime }),
	"conditions": cachedPart("C", func(p *corev1.Pod) *[]corev1.PodCondition { return &p.Status.Conditions },
		func(kept []corev1.PodCondition) ([]corev1.PodCondition, bool) { return slices.Clone(kept), true }),
	"containerStatuses":     cachedPart("S", func(p *corev1.Pod) *[]corev1.ContainerStatus { return &p.Status.ContainerStatuses }, onlyNil),
	"initContainerStatuses": cachedPart("I", func(p *corev1.Pod) *[]corev1.ContainerStatus { return &p.Status.InitContainerStatuses }, onlyNil),
}, "observedGeneration", "message", "reason", "resize", "resourceClaimStatuses", "extendedResourceClaimStatus",
	"allocatedResources", "resources", "nodeAllocatableResourceClaimStatuses", "volumeHealth")

// withBatched adds to table the fields left to encoding/json: fields
// snapshot.Compactor.Compact does not touch.
func withBatched(table map[string]fieldSetter, keys ...string) map[string]fieldSetter {
	for _, key := range keys {
		table[key] = batchedAs(key)
	}
	return table
}

// stringField sets a string field from a plain JSON string.
func stringField(set func(*corev1.Pod, string)) fieldSetter {
	return func(_ *podDecoder, pod *corev1.Pod, val []byte) bool {
		text, ok := nonNullString(val)
		if ok {
			set(pod, text)
		}
		return ok
	}
}

// internedField is stringField sharing equal values, as Compact interns
// the scheduler's and the priority class's names.
func internedField(set func(*corev1.Pod, string)) fieldSetter {
	return func(d *podDecoder, pod *corev1.Pod, val []byte) bool {
		if _, ok := nonNullString(val); !ok {
			return false
		}
		if text, ok := d.lookup("$", val); ok {
			set(pod, text.(string))
			return true
		}
		text, _ := nonNullString(val)
		d.store(text)
		set(pod, text)
		return true
	}
}

// nonNullString is plainString without null (encoding/json leaves a
// string as it was on null; a fresh pod makes that "", but a field given
// twice would not).
func nonNullString(val []byte) (string, bool) {
	if string(val) == "null" {
		return "", false
	}
	return plainString(val)
}

// intPointerField sets an integer field of bits bits from a plain JSON
// integer; anything else (null, fractions, exponents, out of range) goes
// the slow way.
func intPointerField(bits int, set func(*corev1.Pod, int64)) fieldSetter {
	return func(_ *podDecoder, pod *corev1.Pod, val []byte) bool {
		if !plainInteger(val) {
			return false
		}
		number, err := strconv.ParseInt(string(val), 10, bits)
		if err != nil {
			return false
		}
		set(pod, number)
		return true
	}
}

// plainInteger: -?(0|[1-9][0-9]*), JSON's integers.
func plainInteger(val []byte) bool {
	digits := val
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || digits[0] == '0' && len(digits) > 1 {
		return false
	}
	for _, digit := range digits {
		if digit < '0' || digit > '9' {
			return false
		}
	}
	return true
}

// boolField sets a bool field from true or false.
func boolField(set func(*corev1.Pod, bool)) fieldSetter {
	return func(_ *podDecoder, pod *corev1.Pod, val []byte) bool {
		switch string(val) {
		case "true":
			set(pod, true)
		case "false":
			set(pod, false)
		default:
			return false
		}
		return true
	}
}

// timeField sets a metav1.Time as its UnmarshalJSON does: null is the
// zero time, a string is RFC 3339 in local time.
func timeField(get func(*corev1.Pod) *metav1.Time) fieldSetter {
	return func(_ *podDecoder, pod *corev1.Pod, val []byte) bool {
		if string(val) == "null" {
			get(pod).Time = time.Time{}
			return true
		}
		parsed, ok := parseTime(val)
		if ok {
			get(pod).Time = parsed
		}
		return ok
	}
}

// timePointerField sets a *metav1.Time from a string (null goes the slow
// way: it clears the pointer).
func timePointerField(get func(*corev1.Pod) **metav1.Time) fieldSetter {
	return func(_ *podDecoder, pod *corev1.Pod, val []byte) bool {
		parsed, ok := parseTime(val)
		if ok {
			*get(pod) = &metav1.Time{Time: parsed}
		}
		return ok
	}
}

// parseTime reads a plain JSON string as metav1.Time.UnmarshalJSON does.
func parseTime(val []byte) (time.Time, bool) {
	text, ok := nonNullString(val)
	if !ok {
		return time.Time{}, false
	}
	parsed, err := time.Parse(time.RFC3339, text)
	return parsed.Local(), err == nil
}

func ptrTo[T any](value T) *T { return &value }

// sharedPart sets one of the parts Compact shares between pods (labels,
// containers, tolerations...): decoded and compacted once per distinct
// JSON, the same value after.
func sharedPart[T any](tag string, get func(*corev1.Pod) *T) fieldSetter {
	return cachedPart(tag, get, func(kept T) (T, bool) { return kept, true })
}

// onlyNil reuses a compacted part only when it is nil; any other value is
// decoded afresh for each pod (Compact does not share it).
func onlyNil[T any](kept []T) ([]T, bool) { return kept, kept == nil }

// cachedPart sets the part get points at from its compacted value for the
// same JSON, as reuse gives it back (shared, copied, or not at all). A
// part given twice goes the slow way: encoding/json merges the second into
// the first.
func cachedPart[T any](tag string, get func(*corev1.Pod) *T, reuse func(T) (T, bool)) fieldSetter {
	return func(d *podDecoder, pod *corev1.Pod, val []byte) bool {
		if slices.Contains(d.seen, tag) {
			return false
		}
		d.seen = append(d.seen, tag)
		dst := get(pod)
		if kept, found := d.lookup(tag, val); found {
			if value, ok := reuse(kept.(T)); ok {
				*dst = value
				return true
			}
		}
		value, ok := compactPart(d, get, val)
		if ok {
			d.store(value)
			*dst, _ = reuse(value)
		}
		return ok
	}
}

// compactPart decodes val as the part get points at and compacts it as
// Compact compacts that part of a pod.
func compactPart[T any](d *podDecoder, get func(*corev1.Pod) *T, val []byte) (T, bool) {
	scratch := &corev1.Pod{}
	if err := json.Unmarshal(val, get(scratch)); err != nil {
		var zero T
		return zero, false
	}
	d.compactor.Compact(scratch)
	return *get(scratch), true
}

// lookup finds the part stored for tag and val; d.key holds them after,
// for store.
func (d *podDecoder) lookup(tag string, val []byte) (any, bool) {
	d.key = append(append(d.key[:0], tag...), val...)
	kept, found := d.parts[string(d.key)]
	return kept, found
}

// store keeps part under the key the last lookup built.
func (d *podDecoder) store(part any) {
	if d.parts == nil || len(d.parts) >= maxParts {
		d.parts = make(map[string]any, 1024)
	}
	d.parts[string(d.key)] = part
}
