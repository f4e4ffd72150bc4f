package snapshot

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The compact form is what every part of karpfunc holds of a cluster
// object: the live cache as objects arrive, `karpfunc plan` as a dump is
// decoded. Objects keep their Kubernetes types (the engine takes
// []*corev1.Pod), but hold only what a pass reads, and the parts that
// repeat across a workload's replicas are one shared value.
//
// Invariants:
//   - Compacting changes no decision: what the scheduler, disruption and
//     provisioning read stays (TestCompactKeepsSolve and
//     TestCompactKeepsDisruption solve a cluster of API-server-shaped
//     objects before and after and compare). A field a pass starts to read
//     must come off the lists below.
//   - Shared parts are read-only: a pod's labels, annotations, owner
//     references, finalizers, node selector, containers, tolerations,
//     affinity, spread constraints and volumes may be the same value as
//     another pod's; of a pod a PageReader read, every map, slice and
//     pointer of its spec may be (specshare.go). Code that changes a pod
//     changes a copy it made of the part (passes copy a pod with
//     `cp := *p` and assign fields, never write into a map or slice of
//     it).
//   - Compacting an object twice is the same as once.

// lastApplied is kubectl's copy of the whole object in an annotation: often
// the biggest thing on an object, and nothing karpfunc decides by.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// maxShared bounds a Compactor's table: when it holds this many parts it
// starts over, so a long-lived cache's table does not grow with churn
// (sharing then restarts; nothing already shared changes).
const maxShared = 1 << 16

// Compactor compacts objects, sharing parts equal to one it has seen. It
// is not safe for concurrent use; the zero value is ready.
type Compactor struct {
	shared map[string]any
	// handedOut holds the address of every map, slice and pointer in
	// shared: a part found there is already shared, and compacting it
	// again is skipped without building its key. A PageReader's pods
	// arrive with their labels, annotations, owner references and spec
	// parts shared by their bytes (specshare.go), so most parts of a cold
	// start are found here, and building their keys again would be a large
	// share of a cold start's CPU. It is reset with
	// shared, which keeps every part in it alive, so no address in it is
	// reused by another value.
	handedOut map[unsafe.Pointer]struct{}
}

// sliceAddress and mapAddress are where a part's contents live: the same
// address is the same value. An empty part has none (every zero-size
// allocation has one address).
func sliceAddress[S ~[]E, E any](s S) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(s))
}

func mapAddress[M ~map[K]V, K comparable, V any](m M) unsafe.Pointer {
	if len(m) == 0 {
		return nil
	}
	return reflect.ValueOf(m).UnsafePointer()
}

// alreadyShared reports whether the part at address is one c handed out.
func (c *Compactor) alreadyShared(address unsafe.Pointer) bool {
	_, found := c.handedOut[address]
	return found && address != nil
}

// liveCompactor is the one the cache's Compact calls share.
var liveCompactor = struct {
	sync.Mutex
	Compactor
}{}

// Compact compacts obj with a process-wide Compactor: what the live cache
// calls on every object as it arrives.
func Compact(obj client.Object) {
	liveCompactor.Lock()
	defer liveCompactor.Unlock()
	liveCompactor.Compact(obj)
}

// Compact drops from obj what no pass reads and shares its repeated parts:
//   - every kind: managedFields, kubectl's last-applied annotation;
//   - pods: see compactPod;
//   - nodes: the image list.
func (c *Compactor) Compact(obj client.Object) {
	obj.SetManagedFields(nil)
	if ann := obj.GetAnnotations(); ann != nil {
		if _, ok := ann[lastApplied]; ok {
			obj.SetAnnotations(withoutKey(ann, lastApplied))
		}
	}
	switch typed := obj.(type) {
	case *corev1.Pod:
		c.compactPod(typed)
	case *corev1.Node:
		typed.Status.Images = nil
	}
}

// withoutKey is a copy of m without key (m itself may be shared).
func withoutKey(m map[string]string, key string) map[string]string {
	out := maps.Clone(m)
	delete(out, key)
	if len(out) == 0 {
		return nil
	}
	return out
}

// compactPod keeps of a pod its identity and metadata, its scheduling
// constraints, its containers' names, resources, host ports and restart
// policies, its claim volumes, and of its status the phase, the
// PodScheduled and PodResizePending conditions, the start time and
// resources. It drops container images, commands, env, probes, mounts and
// security settings, the volumes no pass reads (projected, config, secret,
// emptyDir...), and the status's IPs, QoS class and container states.
func (c *Compactor) compactPod(pod *corev1.Pod) {
	pod.GenerateName = ""
	pod.Labels = c.stringMap("l", pod.Labels)
	pod.Annotations = c.stringMap("a", pod.Annotations)
	pod.OwnerReferences = c.ownerRefs(pod.OwnerReferences)
	pod.Finalizers = c.strings("f", pod.Finalizers)
	c.compactPodSpec(&pod.Spec)
	compactPodStatus(&pod.Status)
}

func (c *Compactor) compactPodSpec(spec *corev1.PodSpec) {
	spec.Containers = c.containers(spec.Containers)
	spec.InitContainers = c.containers(spec.InitContainers)
	spec.EphemeralContainers = nil // no requests: they never count
	spec.Volumes = c.claimVolumes(spec.Volumes)
	spec.NodeSelector = c.stringMap("s", spec.NodeSelector)
	spec.Tolerations = c.tolerations(spec.Tolerations)
	spec.Affinity = sharedJSON(c, "A", spec.Affinity, unsafe.Pointer(spec.Affinity))
	spec.TopologySpreadConstraints = sharedJSON(c, "T", spec.TopologySpreadConstraints, sliceAddress(spec.TopologySpreadConstraints))
	spec.ImagePullSecrets, spec.SecurityContext = nil, nil
	spec.DNSPolicy, spec.DNSConfig, spec.ServiceAccountName, spec.DeprecatedServiceAccount = "", nil, "", ""
	spec.Hostname, spec.Subdomain, spec.HostAliases = "", "", nil
	spec.SchedulerName = c.intern(spec.SchedulerName)
	spec.PriorityClassName = c.intern(spec.PriorityClassName)
}

// compactPodStatus keeps what the passes read of a pod's status.
func compactPodStatus(status *corev1.PodStatus) {
	status.Conditions = readConditions(status.Conditions)
	status.ContainerStatuses = resourceStatuses(status.ContainerStatuses)
	status.InitContainerStatuses = resourceStatuses(status.InitContainerStatuses)
	status.EphemeralContainerStatuses = nil
	status.HostIP, status.HostIPs, status.PodIP, status.PodIPs = "", nil, "", nil
	status.QOSClass = ""
}

// readConditions are the conditions a pass reads: PodScheduled (pending
// and since when) and PodResizePending (requests).
func readConditions(conditions []corev1.PodCondition) []corev1.PodCondition {
	var kept []corev1.PodCondition
	for _, cond := range conditions {
		if cond.Type == corev1.PodScheduled || cond.Type == corev1.PodResizePending {
			kept = append(kept, cond)
		}
	}
	return kept
}

// resourceStatuses keeps, of each container status, its name and the
// resources it reports (requests follow in-place resizes through them);
// nil when none reports any, which the engine reads the same way (the
// spec's requests).
func resourceStatuses(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	if !slices.ContainsFunc(statuses, func(cs corev1.ContainerStatus) bool { return cs.Resources != nil || cs.AllocatedResources != nil }) {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(statuses))
	for i := range statuses {
		out[i] = corev1.ContainerStatus{Name: statuses[i].Name, Resources: statuses[i].Resources, AllocatedResources: statuses[i].AllocatedResources}
	}
	return out
}

// share returns the part stored under key, or stores and returns part,
// whose contents are at address (nil for a string).
func share[T any](c *Compactor, key string, part T, address unsafe.Pointer) T {
	if prev, ok := c.shared[key]; ok {
		if typed, ok := prev.(T); ok {
			return typed
		}
	}
	if c.shared == nil || len(c.shared) >= maxShared {
		c.shared = make(map[string]any, 1024)
		c.handedOut = make(map[unsafe.Pointer]struct{}, 1024)
	}
	c.shared[key] = part
	if address != nil {
		c.handedOut[address] = struct{}{}
	}
	return part
}

// intern is s, shared with every equal string compacted before.
func (c *Compactor) intern(s string) string {
	if s == "" {
		return s
	}
	return share(c, "$"+s, s, nil)
}

// sharedJSON is part, shared with an equal one compacted before; equal by
// JSON encoding (for the rarer, nested parts: affinity, spread).
func sharedJSON[T any](c *Compactor, tag string, part T, address unsafe.Pointer) T {
	if c.alreadyShared(address) {
		return part
	}
	raw, err := json.Marshal(part)
	if err != nil || string(raw) == "null" {
		return part
	}
	return share(c, tag+string(raw), part, address)
}

// stringMap is m, shared with an equal map compacted before.
func (c *Compactor) stringMap(tag string, m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	if c.alreadyShared(mapAddress(m)) {
		return m
	}
	var keysArray [16]string // most maps: the sort needs no allocation
	keys := sortedKeys(keysArray[:0], m)
	size := len(tag)
	for _, k := range keys {
		size += len(k) + len(m[k]) + 8 // two length prefixes of up to 3 digits and their colons
	}
	var key strings.Builder
	key.Grow(size)
	key.WriteString(tag)
	for _, k := range keys {
		writeField(&key, k)
		writeField(&key, m[k])
	}
	return share(c, key.String(), m, mapAddress(m))
}

// sortedKeys appends m's keys to keys, sorted (slices.Sorted(maps.Keys)
// allocates its slice: in the cold pass's profile over 150,000 pods that
// was a third of compacting's labels and annotations).
func sortedKeys[K ~string, V any](keys []K, m map[K]V) []K {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// writeField writes s length-prefixed, so that no two different lists of
// fields write the same key.
func writeField(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

func (c *Compactor) strings(tag string, list []string) []string {
	if len(list) == 0 {
		return nil
	}
	if c.alreadyShared(sliceAddress(list)) {
		return list
	}
	var key strings.Builder
	key.WriteString(tag)
	for _, s := range list {
		writeField(&key, s)
	}
	return share(c, key.String(), list, sliceAddress(list))
}

func (c *Compactor) ownerRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	if c.alreadyShared(sliceAddress(refs)) {
		return refs
	}
	var key strings.Builder
	key.Grow(128 * len(refs))
	key.WriteByte('o')
	for _, ref := range refs {
		writeField(&key, ref.APIVersion)
		writeField(&key, ref.Kind)
		writeField(&key, ref.Name)
		writeField(&key, string(ref.UID))
		key.WriteString(boolText(ref.Controller))
		key.WriteString(boolText(ref.BlockOwnerDeletion))
	}
	return share(c, key.String(), refs, sliceAddress(refs))
}

func boolText(b *bool) string {
	if b == nil {
		return "-"
	}
	return strconv.FormatBool(*b)
}

func (c *Compactor) tolerations(tols []corev1.Toleration) []corev1.Toleration {
	if len(tols) == 0 {
		return tols
	}
	if c.alreadyShared(sliceAddress(tols)) {
		return tols
	}
	var key strings.Builder
	key.WriteByte('t')
	for _, tol := range tols {
		writeField(&key, tol.Key)
		writeField(&key, string(tol.Operator))
		writeField(&key, tol.Value)
		writeField(&key, string(tol.Effect))
		if tol.TolerationSeconds != nil {
			key.WriteString(strconv.FormatInt(*tol.TolerationSeconds, 10))
		}
		key.WriteByte(';')
	}
	return share(c, key.String(), tols, sliceAddress(tols))
}

// containers keeps of each container what requests, host ports and
// sidecar rules are computed from, shared with equal containers compacted
// before.
func (c *Compactor) containers(list []corev1.Container) []corev1.Container {
	if len(list) == 0 {
		return list
	}
	if c.alreadyShared(sliceAddress(list)) {
		return list
	}
	var key strings.Builder
	key.WriteByte('c')
	for i := range list {
		writeContainerKey(&key, &list[i])
	}
	if prev, ok := c.shared[key.String()]; ok {
		if typed, ok := prev.([]corev1.Container); ok {
			return typed
		}
	}
	kept := make([]corev1.Container, len(list))
	for i := range list {
		kept[i] = compactContainer(&list[i])
	}
	return share(c, key.String(), kept, sliceAddress(kept))
}

func compactContainer(full *corev1.Container) corev1.Container {
	kept := corev1.Container{Name: full.Name, Resources: full.Resources, RestartPolicy: full.RestartPolicy, ResizePolicy: full.ResizePolicy}
	for _, port := range full.Ports {
		if port.HostPort > 0 {
			kept.Ports = append(kept.Ports, port)
		}
	}
	return kept
}

// writeContainerKey writes what compactContainer keeps of container.
func writeContainerKey(key *strings.Builder, container *corev1.Container) {
	writeField(key, container.Name)
	writeResources(key, container.Resources.Requests)
	writeResources(key, container.Resources.Limits)
	for _, claim := range container.Resources.Claims {
		writeField(key, claim.Name)
		writeField(key, claim.Request)
	}
	if container.RestartPolicy != nil {
		writeField(key, string(*container.RestartPolicy))
	}
	for _, policy := range container.ResizePolicy {
		writeField(key, string(policy.ResourceName)+"="+string(policy.RestartPolicy))
	}
	for _, port := range container.Ports {
		if port.HostPort > 0 {
			writeField(key, string(port.Protocol)+"/"+port.HostIP+":"+strconv.Itoa(int(port.HostPort)))
		}
	}
	key.WriteByte(';')
}

func writeResources(key *strings.Builder, list corev1.ResourceList) {
	var namesArray [8]corev1.ResourceName
	for _, name := range sortedKeys(namesArray[:0], list) {
		quantity := list[name]
		writeField(key, string(name))
		writeField(key, quantity.String())
	}
	key.WriteByte('/')
}

// claimVolumes are the volumes a pass reads: those with a
// PersistentVolumeClaim or an ephemeral claim (volume topology); shared
// with equal lists compacted before.
func (c *Compactor) claimVolumes(volumes []corev1.Volume) []corev1.Volume {
	if c.alreadyShared(sliceAddress(volumes)) {
		return volumes
	}
	var kept []corev1.Volume
	for _, vol := range volumes {
		if vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil {
			kept = append(kept, vol)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return sharedJSON(c, "v", kept, sliceAddress(kept))
}

// Strip is Compact, under the name hack/benchscale still calls.
//
// Deprecated: use Compact.
func Strip(obj client.Object) { Compact(obj) }
