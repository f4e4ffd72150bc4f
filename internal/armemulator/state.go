package armemulator

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// Well-known labels a registered node carries.
const (
	labelHostname     = "kubernetes.io/hostname"
	labelInstanceType = "node.kubernetes.io/instance-type"
	labelZone         = "topology.kubernetes.io/zone"
	labelRegion       = "topology.kubernetes.io/region"
	labelOS           = "kubernetes.io/os"
	labelArch         = "kubernetes.io/arch"
)

// opRetention is how long a finished operation stays pollable.
const opRetention = time.Hour

// settleLocked brings every resource to the state the clock says it is in:
// creations finish, deletions complete, succeeded VMs boot. Everything time
// based goes through here, so a fake clock drives the emulator completely.
func (s *Server) settleLocked() {
	now := s.clock.Now()
	for key, vmRecord := range s.vms {
		s.settleVMLocked(now, key, vmRecord)
	}
	for key, nicRecord := range s.nics {
		s.settleNICLocked(now, key, nicRecord)
	}
	for id, op := range s.ops {
		if now.Sub(op.doneAt) > opRetention {
			delete(s.ops, id)
		}
	}
}

// settleVMLocked completes a due deletion or eviction, or moves the VM's
// provisioning state on and boots it once BootDelay has passed.
func (s *Server) settleVMLocked(now time.Time, key string, vmRecord *vmState) {
	if vmRecord.deleting {
		if !now.Before(vmRecord.deleteAt) {
			s.removeVMLocked(key, vmRecord)
		}
		return
	}
	if vmRecord.eviction != nil && !now.Before(vmRecord.eviction.at) {
		s.evictLocked(key, vmRecord)
		return
	}
	state := vmProvisioningState(now, vmRecord)
	vmRecord.vm.Properties.ProvisioningState = ptr(state)
	if state == "Succeeded" && !vmRecord.booted && !now.Before(vmRecord.readyAt.Add(s.opts.BootDelay)) {
		vmRecord.booted = true
		s.bootLocked(vmRecord)
	}
}

func vmProvisioningState(now time.Time, vmRecord *vmState) string {
	switch {
	case now.Before(vmRecord.readyAt):
		return "Creating"
	case vmRecord.failure != nil:
		return "Failed"
	default:
		return "Succeeded"
	}
}

// settleNICLocked completes a due NIC deletion or creation.
func (s *Server) settleNICLocked(now time.Time, key string, nicRecord *nicState) {
	switch {
	case nicRecord.deleting && !now.Before(nicRecord.deleteAt):
		delete(s.nics, key)
	case !nicRecord.deleting && !now.Before(nicRecord.readyAt):
		st := armnetwork.ProvisioningStateSucceeded
		if nicRecord.failure != nil {
			st = armnetwork.ProvisioningStateFailed
		}
		nicRecord.nic.Properties.ProvisioningState = ptr(st)
	}
}

// removeVMLocked makes a VM disappear: its NICs and OS disk are deleted
// with it when their deleteOption says so (as Azure does), otherwise
// released, and its Node goes away like a node whose machine vanished.
func (s *Server) removeVMLocked(key string, v *vmState) {
	delete(s.vms, key)
	s.releaseOSDiskLocked(v, key)
	deleteNIC := map[string]bool{}
	for _, ref := range v.vm.Properties.NetworkProfile.NetworkInterfaces {
		if ref.Properties != nil && deref(ref.Properties.DeleteOption) == armcompute.DeleteOptionsDelete {
			deleteNIC[nicKeyFromID(deref(ref.ID))] = true
		}
	}
	for _, nk := range v.nicKeys {
		nicRecord, ok := s.nics[nk]
		if !ok || nicRecord.vmKey != key {
			continue
		}
		nicRecord.vmKey = ""
		nicRecord.nic.Properties.VirtualMachine = nil
		if deleteNIC[nk] {
			delete(s.nics, nk)
			s.counters.NICDeletes++
		}
	}
	delete(s.bootErrors, strings.ToLower(v.name()))
	if s.nodes != nil {
		s.nodes.delete(nodeName(v))
	}
	s.log.Info("VM deleted", "name", v.name())
}

func nodeName(v *vmState) string {
	if props := v.vm.Properties; props != nil && props.OSProfile != nil && deref(props.OSProfile.ComputerName) != "" {
		return strings.ToLower(deref(props.OSProfile.ComputerName))
	}
	return strings.ToLower(v.name())
}

// bootLocked boots v's node image: it reads the customData and starts the
// kubelet, which joins in the background. A refusal is recorded (BootError):
// the VM runs but never joins, as on Azure. So is a VM with no outbound path
// (nodenetwork.go).
func (s *Server) bootLocked(v *vmState) {
	// Default outbound access ends with private subnets: a node with no
	// way out never reaches the API server's public endpoint (checked even
	// without a cluster, so BootError says so).
	if reason := s.noOutboundLocked(v); reason != "" {
		s.bootErrors[strings.ToLower(v.name())] = reason
		s.log.Warn("VM booted but its kubelet cannot reach the API server", "name", v.name(), "reason", reason)
		return
	}
	if s.nodes == nil {
		return
	}
	if s.neverJoins != nil && s.neverJoins(v.name()) {
		s.log.Warn("VM booted but will not join the cluster (fault)", "name", v.name())
		return
	}
	node, err := s.kubeletFor(v)
	if err != nil {
		s.bootErrors[strings.ToLower(v.name())] = err.Error()
		s.log.Warn("VM booted but its node image cannot start a kubelet", "name", v.name(), "reason", err)
		return
	}
	s.nodes.start(node)
}

// kubeletFor is the kubelet v's node image starts: the Node it registers
// carries the labels and taints of its flags, plus what the kubelet and the
// cloud node manager set themselves (hostname, OS, architecture, instance
// type, region, zone, provider ID, addresses, resources).
func (s *Server) kubeletFor(v *vmState) (kubelet, error) {
	props := v.vm.Properties
	customData := ""
	if props.OSProfile != nil {
		customData = deref(props.OSProfile.CustomData)
	}
	prov, err := provision(customData)
	if err != nil {
		return kubelet{}, err
	}
	if err := checkKubeletIdentity(&v.vm, prov.kubeletIdentity); err != nil {
		return kubelet{}, err
	}
	if msg := nicPodIPsProblem(prov, s.ipConfigurationsLocked(v)); msg != "" {
		return kubelet{}, errors.New(msg)
	}
	sku := string(deref(props.HardwareProfile.VMSize))
	capacity, arch, err := s.nodeResources(sku, prov.maxPods)
	if err != nil {
		return kubelet{}, err
	}
	// GPUs appear only when a device plugin registers them (gpu.go).
	gpus := capacity[corev1.ResourceName("nvidia.com/gpu")]
	gpu, err := readGPU(prov.vars, sku, capacity)
	if err != nil {
		return kubelet{}, err
	}
	capacity = withoutDeviceResources(capacity)
	allocatable := prov.reservations.allocatable(capacity)
	name := nodeName(v)
	labels := map[string]string{}
	for key, val := range prov.labels {
		labels[key] = val
	}
	labels[labelHostname] = name
	labels[labelInstanceType] = sku
	labels[labelRegion] = v.location
	if v.zone != "" {
		labels[labelZone] = v.zone
	}
	labels[labelOS] = "linux"
	labels[labelArch] = arch

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{
			ProviderID: azure.ProviderID(v.sub, v.rg, v.name()),
			Taints:     prov.taints,
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			NodeInfo: corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: "linux",
				KubeletVersion: prov.version, ContainerRuntimeVersion: "containerd://2.0.0"},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		},
	}
	if ip := s.privateIPLocked(v); ip != "" {
		node.Status.Addresses = append([]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}, node.Status.Addresses...)
	}
	if reason, msg := s.notReadyReason(v, prov); msg != "" {
		s.markNotReady(node, reason, msg)
		s.bootErrors[strings.ToLower(v.name())] = msg
		s.log.Warn("node registers but its pod network is not ready", "name", v.name(), "reason", reason, "message", msg)
	}
	return kubelet{node: node, prov: prov, gpus: gpus, gpu: gpu}, nil
}

// notReadyReason says why v's node registers but never becomes Ready: its
// provisioning does not fit the cluster's network profile, or its node image
// does not support its Kubernetes version (cluster.go).
func (s *Server) notReadyReason(v *vmState, prov *provisioning) (string, string) {
	if msg := s.opts.Cluster.networkProblem(prov.networkPlugin); msg != "" {
		return "NetworkPluginMismatch", msg
	}
	imageID := ""
	if sp := v.vm.Properties.StorageProfile; sp != nil && sp.ImageReference != nil {
		imageID = deref(sp.ImageReference.CommunityGalleryImageID)
	}
	if msg := imageProblem(imageID, prov.minor); msg != "" {
		return "NodeImageUnsupported", msg + ": no CNI is installed for it"
	}
	return "", ""
}

// markNotReady makes node register as a kubelet whose pod network never
// came up does: NetworkUnavailable True and Ready False (the kubelet's
// "container runtime network not ready"), and kwok does not play its
// kubelet, so nothing makes it Ready.
func (s *Server) markNotReady(node *corev1.Node, reason, msg string) {
	delete(node.Annotations, KwokNodeAnnotation)
	now := metav1.NewTime(s.clock.Now())
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", LastHeartbeatTime: now, LastTransitionTime: now,
			Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"},
	}
}

// ipConfigurationsLocked counts the IP configurations of v's NICs.
func (s *Server) ipConfigurationsLocked(v *vmState) int {
	count := 0
	for _, nk := range v.nicKeys {
		if nic, ok := s.nics[nk]; ok && nic.nic.Properties != nil {
			count += len(nic.nic.Properties.IPConfigurations)
		}
	}
	return count
}

func (s *Server) privateIPLocked(v *vmState) string {
	for _, nk := range v.nicKeys {
		if nicRecord, ok := s.nics[nk]; ok && nicRecord.nic.Properties != nil {
			for _, ipc := range nicRecord.nic.Properties.IPConfigurations {
				if ipc != nil && ipc.Properties != nil && deref(ipc.Properties.PrivateIPAddress) != "" {
					return *ipc.Properties.PrivateIPAddress
				}
			}
		}
	}
	return ""
}

// nodeResources asks Options.NodeResources for the node's capacity, then
// falls back to the SKU's capabilities.
func (s *Server) nodeResources(sku string, maxPods int32) (corev1.ResourceList, string, error) {
	if s.opts.NodeResources != nil {
		if capacity, arch, ok := s.opts.NodeResources(sku, maxPods); ok {
			if arch == "" {
				arch = "amd64"
			}
			return capacity, arch, nil
		}
	}
	if rs := s.vmSKU(sku); rs != nil {
		if capability := skuCapabilitiesOf(rs); capability.cpu != "" && capability.memGB != "" {
			return capability.nodeResources(sku, maxPods)
		}
	}
	return nil, "", fmt.Errorf("no resources known for VM size %q (no NodeResources answer, no SKU capabilities)", sku)
}

// vmSKU returns the first virtualMachines entry of Options.SKUs named
// sku, or nil.
func (s *Server) vmSKU(sku string) *armcompute.ResourceSKU {
	for _, rs := range s.opts.SKUs {
		if rs != nil && strings.EqualFold(deref(rs.Name), sku) && strings.EqualFold(deref(rs.ResourceType), "virtualMachines") {
			return rs
		}
	}
	return nil
}

// skuCapabilities are the capability values a Node's resources come from.
type skuCapabilities struct {
	cpu, memGB, arch string
}

func skuCapabilitiesOf(rs *armcompute.ResourceSKU) skuCapabilities {
	var found skuCapabilities
	for _, capability := range rs.Capabilities {
		switch deref(capability.Name) {
		case "vCPUs":
			found.cpu = deref(capability.Value)
		case "MemoryGB":
			found.memGB = deref(capability.Value)
		case "CpuArchitectureType":
			found.arch = deref(capability.Value)
		}
	}
	return found
}

// guestMemoryOverhead is the share of a size's memory the guest does not
// see as MemTotal, which the kubelet reports as capacity. Guests lose some
// to the kernel and firmware: AKS nodes of 4 GiB sizes have reported
// 4017088Ki and 4025836Ki (Azure/AKS issues #1216, #3525), about 4% below.
// The emulated guest loses 7.5%, the Azure
// provider's VM_MEMORY_OVERHEAD_PERCENT default (karpenter-provider-azure
// pkg/operator/options/options.go:110), more than any observed loss: a
// plan that fits it fits a real node.
const guestMemoryOverhead = 0.075

// nodeResources is the capacity the kubelet reports for the size and the
// Node's architecture: the vCPUs, the memory the guest sees and maxPods.
func (c skuCapabilities) nodeResources(sku string, maxPods int32) (corev1.ResourceList, string, error) {
	gb, err := strconv.ParseFloat(c.memGB, 64)
	if err != nil {
		return nil, "", fmt.Errorf("SKU %s: MemoryGB %q: %w", sku, c.memGB, err)
	}
	cpuQ, err := resource.ParseQuantity(c.cpu)
	if err != nil {
		return nil, "", fmt.Errorf("SKU %s: vCPUs %q: %w", sku, c.cpu, err)
	}
	memory := int64(gb*1024) * 1024 * 1024
	memory -= int64(math.Ceil(float64(memory) * guestMemoryOverhead))
	list := corev1.ResourceList{
		corev1.ResourceCPU:    cpuQ,
		corev1.ResourceMemory: *resource.NewQuantity(memory, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	nodeArch := "amd64"
	if strings.EqualFold(c.arch, "Arm64") {
		nodeArch = "arm64"
	}
	return list, nodeArch, nil
}

// VMs returns a snapshot of the VMs, sorted by name, as stored (including
// customData, which ARM itself never returns).
func (s *Server) VMs() []*armcompute.VirtualMachine {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]*armcompute.VirtualMachine, 0, len(s.vms))
	for _, vmRecord := range s.vms {
		out = append(out, deepCopyVM(&vmRecord.vm))
	}
	sort.Slice(out, func(i, j int) bool { return deref(out[i].Name) < deref(out[j].Name) })
	return out
}

// NICs returns a snapshot of the network interfaces, sorted by name.
func (s *Server) NICs() []*armnetwork.Interface {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]*armnetwork.Interface, 0, len(s.nics))
	for _, nicRecord := range s.nics {
		out = append(out, deepCopyNIC(&nicRecord.nic))
	}
	sort.Slice(out, func(i, j int) bool { return deref(out[i].Name) < deref(out[j].Name) })
	return out
}
