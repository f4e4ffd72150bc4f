package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// A dump read by `karpfunc plan` has not been through an API server: it may
// hold what one would refuse, and lack what one would default. The live
// loop reads objects the API server stored, so only plan checks and
// defaults, here, by the API server's rules for the fields planning reads
// (the containers' resources of Pods and DaemonSet templates, a pod's
// overhead and pod-level resources, a Node's capacity and allocatable, a
// NodePool's weight, limits' format and
// Karpenter's runtime rules), and both then compute requests the same way
// (the scheduler's, through snapshot.Cluster.Input).
//
// The rules are k8s.io/kubernetes v1.37 pkg/apis/core/validation
// (validation.go: validateResourceRequirements, ValidateContainerResourceName,
// validateResourceName, ValidateResourceQuantityValue) with the predicates of
// pkg/apis/core/helper (helpers.go), and the defaulting of
// pkg/apis/core/v1/defaults.go SetDefaults_Pod. That module is not a library
// (it cannot be required), so the predicates are restated below, each by
// its source; the name grammar and error rendering are apimachinery's, the
// pod-level resource names k8s.io/component-helpers'.

// InvalidError is an object the API server would refuse: its kind and
// name, and every field at fault, each with its path as the API server
// prints it (spec.containers[0].resources.requests[cpu]).
type InvalidError struct {
	Kind, Name string
	Errs       fieldpath.ErrorList
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		parts[i] = err.Error()
	}
	return fmt.Sprintf("%s %s is invalid (the API server would refuse it): %s", e.Kind, e.Name, strings.Join(parts, "; "))
}

// Unwrap is every field error.
func (e *InvalidError) Unwrap() []error {
	out := make([]error, len(e.Errs))
	for i, err := range e.Errs {
		out[i] = err
	}
	return out
}

// Resource names of pkg/apis/core/helper's sets (helpers.go
// standardResources, standardContainerResources, integerResources).
var (
	// standardResources: validateResourceName's unprefixed names.
	standardResources = sets.New[corev1.ResourceName](corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
		corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
		corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
		corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
		corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims, corev1.ResourceStorage,
		corev1.ResourceRequestsStorage, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)
	// standardContainerResources: what a container may request unprefixed
	// (besides hugepages-*).
	standardContainerResources = sets.New[corev1.ResourceName](corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage)
	// integerResources: counted in whole units (besides extended resources).
	integerResources = sets.New[corev1.ResourceName](corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices,
		corev1.ResourceReplicationControllers, corev1.ResourceSecrets, corev1.ResourceConfigMaps,
		corev1.ResourcePersistentVolumeClaims, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)
)

// isHugePages: helper.IsHugePageResourceName.
func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// isQuotaHugePages: helper.IsQuotaHugePageResourceName.
func isQuotaHugePages(name corev1.ResourceName) bool {
	return isHugePages(name) || strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

// isNative: helper.IsNativeResource: unprefixed, or in kubernetes.io/.
func isNative(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtended: helper.IsExtendedResourceName: not native, not "requests."
// prefixed, and a qualified name once prefixed with "requests." (its quota
// name).
func isExtended(name corev1.ResourceName) bool {
	if isNative(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// overcommitAllowed: helper.IsOvercommitAllowed: native and not hugepages.
// The others (extended resources, hugepages) need requests equal to limits.
func overcommitAllowed(name corev1.ResourceName) bool {
	return isNative(name) && !isHugePages(name)
}

// validateResourceName: validation.go validateResourceName.
func validateResourceName(name corev1.ResourceName, path *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, fieldpath.Invalid(path, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	if !strings.Contains(string(name), "/") && !standardResources.Has(name) && !isQuotaHugePages(name) {
		return append(errs, fieldpath.Invalid(path, name, "must be a standard resource type or fully qualified"))
	}
	return nil
}

// validateContainerResourceName: validation.go ValidateContainerResourceName.
func validateContainerResourceName(name corev1.ResourceName, path *fieldpath.Path) fieldpath.ErrorList {
	errs := validateResourceName(name, path)
	switch {
	case !strings.Contains(string(name), "/"):
		if !standardContainerResources.Has(name) && !isHugePages(name) {
			return append(errs, fieldpath.Invalid(path, name, "must be a standard resource for containers"))
		}
	case !isNative(name) && !isExtended(name):
		return append(errs, fieldpath.Invalid(path, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

// validatePodResourceName: validation.go validatePodResourceName.
func validatePodResourceName(name corev1.ResourceName, path *fieldpath.Path) fieldpath.ErrorList {
	if errs := validateResourceName(name, path); len(errs) > 0 {
		return errs
	}
	if !resourcehelper.IsSupportedPodLevelResource(name) {
		return fieldpath.ErrorList{fieldpath.NotSupported(path, name, sets.List(resourcehelper.SupportedPodLevelResources()))}
	}
	return nil
}

// validateQuantity: validation.go ValidateResourceQuantityValue: not
// negative, and whole for integer and extended resources.
func validateQuantity(name corev1.ResourceName, value resource.Quantity, path *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	if value.Sign() < 0 {
		errs = append(errs, fieldpath.Invalid(path, value.String(), "must be greater than or equal to 0"))
	}
	if (integerResources.Has(name) || isExtended(name)) && value.MilliValue()%1000 != 0 {
		errs = append(errs, fieldpath.Invalid(path, value, "must be an integer"))
	}
	return errs
}

// hugePagesDivisible: helper.IsHugePageResourceValueDivisible: a whole
// number of pages of the size the name gives (hugepages-2Mi).
func hugePagesDivisible(name corev1.ResourceName, value resource.Quantity) bool {
	pageSize, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err != nil || pageSize.Sign() <= 0 || pageSize.MilliValue()%1000 != 0 {
		return false
	}
	return value.Value()%pageSize.Value() == 0
}

// validateResources: validation.go validateResourceRequirements, for the
// requests and limits (claims are not read by planning).
func validateResources(res *corev1.ResourceRequirements, nameRule func(corev1.ResourceName, *fieldpath.Path) fieldpath.ErrorList, path *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	cpuOrMemory, hugePages := false, false
	check := func(list corev1.ResourceList, listPath *fieldpath.Path) {
		for _, name := range sortedKeys(list) {
			quantity, at := list[name], listPath.Key(string(name))
			errs = append(errs, nameRule(name, at)...)
			errs = append(errs, validateQuantity(name, quantity, at)...)
			if isHugePages(name) {
				hugePages = true
				if !hugePagesDivisible(name, quantity) {
					errs = append(errs, fieldpath.Invalid(at, quantity.String(), fmt.Sprintf("%s is not positive integer multiple of %s", quantity.String(), name)))
				}
			}
			cpuOrMemory = cpuOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
		}
	}
	check(res.Limits, limPath)
	check(res.Requests, reqPath)
	for _, name := range sortedKeys(res.Requests) {
		if err := requestAgainstLimit(name, res, path); err != nil {
			errs = append(errs, err)
		}
	}
	if hugePages && !cpuOrMemory {
		errs = append(errs, fieldpath.Forbidden(path, "HugePages require cpu or memory"))
	}
	return errs
}

// requestAgainstLimit: a request is at most its limit, and equal to it
// for a resource that cannot be overcommitted (extended resources,
// hugepages), which must have a limit (validateResourceRequirements).
func requestAgainstLimit(name corev1.ResourceName, res *corev1.ResourceRequirements, path *fieldpath.Path) *fieldpath.Error {
	request := res.Requests[name]
	limit, limited := res.Limits[name]
	switch {
	case limited && !overcommitAllowed(name) && request.Cmp(limit) != 0:
		return fieldpath.Invalid(path.Child("requests"), request.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String()))
	case limited && request.Cmp(limit) > 0:
		return fieldpath.Invalid(path.Child("requests"), request.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String()))
	case !limited && !overcommitAllowed(name):
		return fieldpath.Required(path.Child("limits"), "Limit must be set for non overcommitable resources")
	}
	return nil
}

func sortedKeys(list corev1.ResourceList) []corev1.ResourceName {
	return slices.Sorted(maps.Keys(list))
}

// validatePodSpec checks what planning reads of a pod spec: it has
// containers (validation.go validateContainers: "Required value"), and
// the resources of its containers, init containers, overhead (checked as
// limits, validation.go validateOverhead) and pod-level resources.
func validatePodSpec(spec *corev1.PodSpec, path *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, fieldpath.Required(path.Child("containers"), "a pod needs at least one container"))
	}
	errs = append(errs, validateContainers(spec.Containers, path.Child("containers"))...)
	errs = append(errs, validateContainers(spec.InitContainers, path.Child("initContainers"))...)
	if len(spec.Overhead) > 0 {
		errs = append(errs, validateResources(&corev1.ResourceRequirements{Limits: spec.Overhead}, validateContainerResourceName, path.Child("overhead"))...)
	}
	if spec.Resources != nil {
		errs = append(errs, validateResources(spec.Resources, validatePodResourceName, path.Child("resources"))...)
	}
	return errs
}

func validateContainers(containers []corev1.Container, path *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	for i := range containers {
		errs = append(errs, validateResources(&containers[i].Resources, validateContainerResourceName, path.Index(i).Child("resources"))...)
	}
	return errs
}

// defaultedContainers is containers with each container's requests
// defaulted to its limits for every resource it limits but does not
// request (pkg/apis/core/v1/defaults.go SetDefaults_Pod: "If limits are
// specified, but requests are not, default requests to limits"), so
// `limits: {nvidia.com/gpu: 1}` asks for a GPU as the API server would
// store it. The API server does this for Pods only, not for pod templates
// (a DaemonSet's pods are defaulted when created). containers may be
// shared with other pods: it is never written; a copy is returned when
// anything is defaulted.
func defaultedContainers(containers []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for i := range containers {
		missing := false
		for name := range containers[i].Resources.Limits {
			if _, ok := containers[i].Resources.Requests[name]; !ok {
				missing = true
				break
			}
		}
		if !missing {
			continue
		}
		if out == nil {
			out = make([]corev1.Container, len(containers))
			copy(out, containers)
		}
		requests := make(corev1.ResourceList, len(containers[i].Resources.Limits))
		maps.Copy(requests, containers[i].Resources.Requests)
		for name, limit := range containers[i].Resources.Limits {
			if _, ok := requests[name]; !ok {
				requests[name] = limit.DeepCopy()
			}
		}
		out[i].Resources.Requests = requests
	}
	if out == nil {
		return containers
	}
	return out
}

// podChecker defaults and validates pods for one decoder. Pods of a
// workload share their containers (see podDecoder), so each distinct
// containers slice is defaulted and checked once; a failure ends the read,
// so only good slices are remembered.
type podChecker struct {
	checked map[*corev1.Container][]corev1.Container
}

// check defaults pod's requests in place (its containers slices are
// replaced, never written) and validates it; the error is an
// *InvalidError naming the fields.
func (c *podChecker) check(pod *corev1.Pod) error {
	if c.checked == nil || len(c.checked) >= maxParts {
		c.checked = make(map[*corev1.Container][]corev1.Container, 256)
	}
	pod.Spec.Containers = c.defaulted(pod.Spec.Containers)
	pod.Spec.InitContainers = c.defaulted(pod.Spec.InitContainers)
	if c.known(pod.Spec.Containers) && (len(pod.Spec.InitContainers) == 0 || c.known(pod.Spec.InitContainers)) &&
		len(pod.Spec.Overhead) == 0 && pod.Spec.Resources == nil {
		return nil
	}
	if errs := validatePodSpec(&pod.Spec, fieldpath.NewPath("spec")); len(errs) > 0 {
		return &InvalidError{Kind: "Pod", Name: objectName(pod.Namespace, pod.Name), Errs: errs}
	}
	for _, containers := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		if len(containers) > 0 {
			c.checked[&containers[0]] = containers
		}
	}
	return nil
}

// known reports whether containers (not empty) is a slice checked before.
func (c *podChecker) known(containers []corev1.Container) bool {
	if len(containers) == 0 {
		return false
	}
	done, ok := c.checked[&containers[0]]
	return ok && &done[0] == &containers[0]
}

// defaulted is defaultedContainers(containers), once per slice.
func (c *podChecker) defaulted(containers []corev1.Container) []corev1.Container {
	if len(containers) == 0 {
		return containers
	}
	if done, ok := c.checked[&containers[0]]; ok {
		return done
	}
	out := defaultedContainers(containers)
	if &out[0] != &containers[0] {
		// The original maps to its defaulted copy; the copy is looked up
		// as itself once checked.
		c.checked[&containers[0]] = out
	}
	return out
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// validateObject checks the kinds other than Pod whose fields planning
// reads resources or settings from; nil when obj is valid or of a kind
// not checked.
func validateObject(ctx context.Context, obj any) error {
	switch typed := obj.(type) {
	case *appsv1.DaemonSet:
		// A DaemonSet's template is validated as a pod spec
		// (validation.go ValidatePodTemplateSpec), not defaulted.
		if errs := validatePodSpec(&typed.Spec.Template.Spec, fieldpath.NewPath("spec", "template", "spec")); len(errs) > 0 {
			return &InvalidError{Kind: "DaemonSet", Name: objectName(typed.Namespace, typed.Name), Errs: errs}
		}
	case *corev1.Node:
		if errs := validateNodeResources(typed); len(errs) > 0 {
			return &InvalidError{Kind: "Node", Name: typed.Name, Errs: errs}
		}
	case *karpv1.NodePool:
		if errs := validateNodePool(ctx, typed); len(errs) > 0 {
			return &InvalidError{Kind: "NodePool", Name: typed.Name, Errs: errs}
		}
	}
	return nil
}

// validateNodeResources: validation.go ValidateNodeResources: a node's
// capacity and allocatable, which planning counts a bound node's room
// from, are valid quantities of their resources.
func validateNodeResources(node *corev1.Node) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	for _, list := range []struct {
		name      string
		resources corev1.ResourceList
	}{{"capacity", node.Status.Capacity}, {"allocatable", node.Status.Allocatable}} {
		for _, name := range sortedKeys(list.resources) {
			errs = append(errs, validateQuantity(name, list.resources[name], fieldpath.NewPath("status", list.name, string(name)))...)
		}
	}
	return errs
}

// validateNodePool checks the NodePool fields planning relies on that the
// CRD's schema bounds (sigs.k8s.io/karpenter pkg/apis/crds
// karpenter.sh_nodepools.yaml: weight 1 to 100; its limits' pattern admits
// negative quantities, so they are not refused, and a malformed one fails
// to decode) and Karpenter's runtime validation (NodePool.RuntimeValidate:
// template labels, taints, requirements), which the live loop reports as
// the NodePool's ValidationSucceeded condition.
func validateNodePool(ctx context.Context, np *karpv1.NodePool) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	spec := fieldpath.NewPath("spec")
	if np.Spec.Weight != nil && (*np.Spec.Weight < 1 || *np.Spec.Weight > 100) {
		errs = append(errs, fieldpath.Invalid(spec.Child("weight"), *np.Spec.Weight, "must be between 1 and 100"))
	}
	if err := np.RuntimeValidate(ctx); err != nil {
		errs = append(errs, fieldpath.Invalid(spec.Child("template"), fieldpath.OmitValueType{}, err.Error()))
	}
	return errs
}

var quantityType = reflect.TypeFor[resource.Quantity]()

// malformedQuantity finds, in js, the first quantity of obj's type that
// does not parse, as the field error the API server gives when it cannot
// decode one (resource.ParseQuantity's message); nil when js's quantities
// all parse (its decoding failed for another reason). It walks js along
// obj's Go type, by JSON field names, so it knows which strings are
// quantities.
func malformedQuantity(obj any, js []byte) *fieldpath.Error {
	decoder := json.NewDecoder(bytes.NewReader(js))
	decoder.UseNumber()
	var tree any
	if err := decoder.Decode(&tree); err != nil {
		return nil
	}
	return findMalformed(reflect.TypeOf(obj), tree, nil)
}

func findMalformed(typ reflect.Type, value any, path *fieldpath.Path) *fieldpath.Error {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == quantityType:
		return malformedValue(value, path)
	case typ.Kind() == reflect.Struct:
		if object, ok := value.(map[string]any); ok {
			return malformedInStruct(typ, object, path)
		}
	case typ.Kind() == reflect.Slice:
		if items, ok := value.([]any); ok {
			for i, item := range items {
				if bad := findMalformed(typ.Elem(), item, path.Index(i)); bad != nil {
					return bad
				}
			}
		}
	case typ.Kind() == reflect.Map:
		if entries, ok := value.(map[string]any); ok {
			for _, key := range slices.Sorted(maps.Keys(entries)) {
				if bad := findMalformed(typ.Elem(), entries[key], path.Key(key)); bad != nil {
					return bad
				}
			}
		}
	}
	return nil
}

// malformedValue is the error of a quantity's JSON value (a string, or a
// number as written) that does not parse.
func malformedValue(value any, path *fieldpath.Path) *fieldpath.Error {
	var text string
	switch v := value.(type) {
	case string:
		text = v
	case json.Number:
		text = v.String()
	default:
		return nil
	}
	if _, err := resource.ParseQuantity(text); err != nil {
		return fieldpath.Invalid(path, text, err.Error())
	}
	return nil
}

// malformedInStruct walks a struct's fields by their JSON names; embedded
// structs without a name (TypeMeta) are read from the same object.
func malformedInStruct(typ reflect.Type, object map[string]any, path *fieldpath.Path) *fieldpath.Error {
	for i := range typ.NumField() {
		field := typ.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if field.Anonymous && name == "" {
			if bad := findMalformed(field.Type, object, path); bad != nil {
				return bad
			}
			continue
		}
		child, ok := object[name]
		if name == "" || name == "-" || !field.IsExported() || !ok {
			continue
		}
		if bad := findMalformed(field.Type, child, path.Child(name)); bad != nil {
			return bad
		}
	}
	return nil
}
