package scheduler

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// azureDiskZoneKey is the zone label the Azure Disk CSI driver writes into
// PV node affinity; AKS nodes carry it with the same value as the
// well-known zone label, which is what NodePools select on.
const azureDiskZoneKey = "topology.disk.csi.azure.com/zone"

// volumes resolves a pod's PVCs to the topology they pin it to: a bound
// PV's node affinity, or an unbound claim's StorageClass
// allowedTopologies. Kinds absent from the snapshot are not enforced, so a
// caller that does not list PVs is not punished for it.
type volumes struct {
	pvcs      map[string]*corev1.PersistentVolumeClaim
	pvs       map[string]*corev1.PersistentVolume
	classes   map[string]*storagev1.StorageClass
	defaultSC *storagev1.StorageClass
	havePVCs  bool
}

func newVolumes(in Input) *volumes {
	v := &volumes{pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	for _, pvc := range in.PersistentVolumeClaims {
		if pvc != nil {
			v.pvcs[pvc.Namespace+"/"+pvc.Name] = pvc
			v.havePVCs = true
		}
	}
	for _, pv := range in.PersistentVolumes {
		if pv != nil {
			v.pvs[pv.Name] = pv
		}
	}
	for _, sc := range in.StorageClasses {
		if sc == nil {
			continue
		}
		v.classes[sc.Name] = sc
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			v.defaultSC = sc
		}
	}
	return v
}

func (v *volumes) requirements(pod *corev1.Pod) (scheduling.Requirements, string) {
	var reqs scheduling.Requirements
	for i := range pod.Spec.Volumes {
		exprs, constrains, problem := v.volumeTopology(pod, &pod.Spec.Volumes[i])
		if problem != "" {
			return nil, problem
		}
		if !constrains {
			continue
		}
		if reqs == nil {
			reqs = scheduling.NewRequirements()
		}
		reqs.Add(scheduling.NewNodeSelectorRequirements(translateDiskZone(exprs)...).Values()...)
	}
	return reqs, ""
}

// translateDiskZone returns exprs with Azure Disk's zone key replaced by
// the well-known zone label.
func translateDiskZone(exprs []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	translated := make([]corev1.NodeSelectorRequirement, len(exprs))
	for i, expr := range exprs {
		if expr.Key == azureDiskZoneKey {
			expr.Key = corev1.LabelTopologyZone
		}
		translated[i] = expr
	}
	return translated
}

// volumeTopology returns the node selector expressions a pod volume's
// claim puts on the node (constrains set even when they are empty), or why
// the claim, its volume or its class is missing. A volume without a claim,
// or whose claim, volume or class is unknown because none of that kind was
// given, constrains nothing.
func (v *volumes) volumeTopology(pod *corev1.Pod, vol *corev1.Volume) (exprs []corev1.NodeSelectorRequirement, constrains bool, problem string) {
	var name string
	var className *string
	switch {
	case vol.PersistentVolumeClaim != nil:
		name = vol.PersistentVolumeClaim.ClaimName
	case vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil:
		name = pod.Name + "-" + vol.Name
		className = vol.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
	default:
		return nil, false, ""
	}
	pvc := v.pvcs[pod.Namespace+"/"+name]
	switch {
	case pvc != nil:
		className = pvc.Spec.StorageClassName
	case vol.Ephemeral != nil:
	case !v.havePVCs:
		return nil, false, ""
	default:
		return nil, false, fmt.Sprintf("volume %s uses PersistentVolumeClaim %s/%s, which does not exist", vol.Name, pod.Namespace, name)
	}
	if pvc != nil && pvc.Spec.VolumeName != "" {
		return v.boundTopology(pod.Namespace, name, pvc.Spec.VolumeName)
	}
	return v.classTopology(pod.Namespace, name, className)
}

// boundTopology is volumeTopology for claim namespace/name bound to
// PersistentVolume volumeName: the first term of its required node
// affinity.
func (v *volumes) boundTopology(namespace, name, volumeName string) ([]corev1.NodeSelectorRequirement, bool, string) {
	pv, ok := v.pvs[volumeName]
	if !ok {
		if len(v.pvs) > 0 {
			return nil, false, fmt.Sprintf("PersistentVolumeClaim %s/%s is bound to PersistentVolume %s, which does not exist", namespace, name, volumeName)
		}
		return nil, false, ""
	}
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil && len(na.Required.NodeSelectorTerms) > 0 {
		return na.Required.NodeSelectorTerms[0].MatchExpressions, true, ""
	}
	return nil, false, ""
}

// classTopology is volumeTopology for unbound claim namespace/name of
// StorageClass className (nil or empty: the default class): the first
// of the class's allowed topologies.
func (v *volumes) classTopology(namespace, name string, className *string) ([]corev1.NodeSelectorRequirement, bool, string) {
	sc := v.defaultSC
	if className != nil && *className != "" {
		sc = v.classes[*className]
		if sc == nil {
			if len(v.classes) > 0 {
				return nil, false, fmt.Sprintf("PersistentVolumeClaim %s/%s uses StorageClass %s, which does not exist", namespace, name, *className)
			}
			return nil, false, ""
		}
	}
	if sc == nil || len(sc.AllowedTopologies) == 0 {
		return nil, false, ""
	}
	var exprs []corev1.NodeSelectorRequirement
	for _, expr := range sc.AllowedTopologies[0].MatchLabelExpressions {
		exprs = append(exprs, corev1.NodeSelectorRequirement{Key: expr.Key, Operator: corev1.NodeSelectorOpIn, Values: expr.Values})
	}
	return exprs, true, ""
}
