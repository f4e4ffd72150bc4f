// Package cloudprovider is the contract between karpfunc's controllers and
// the cloud that runs their nodes, after Karpenter's pkg/cloudprovider:
// what an instance and a launch request are, the operations on instances,
// and the typed errors that say what a failure means for the caller.
//
// The controllers (provisioning, lifecycle) depend on this package only;
// one implementation, pkg/azure, turns ARM answers into it. Deciding what
// an ARM error means (capacity, throttling, not found, a create that cannot
// succeed) happens there and nowhere else: here an error is read by its type.
//
// Karpenter's CloudProvider.Create waits for the instance; Azure takes
// minutes to create a VM and a Functions invocation must not wait for it,
// so Create is split into its non-blocking steps (BeginNIC, BeginVM, then
// Status until the instance is Succeeded or Failed), and Delete into
// BeginDelete and DeleteStep.
package cloudprovider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// Provisioning states of an instance (and of its NIC), as the provider
// reports them; compare with strings.EqualFold.
const (
	StateCreating  = "Creating"
	StateSucceeded = "Succeeded"
	StateFailed    = "Failed"
	StateDeleting  = "Deleting"
)

// LaunchRequest describes one node instance. Name is deterministic (the
// NodeClaim name) so that a replayed request finds what the first attempt
// created.
type LaunchRequest struct {
	// Name is the VM name, its computer name (and so the node name); the NIC
	// is Name+"-nic".
	Name      string
	NodePool  string
	NodeClaim string // defaults to Name

	InstanceType string // Azure VM size, e.g. Standard_D4s_v5
	// Zone is the Kubernetes zone, "<location>-<n>" (e.g. "eastus-1"); empty
	// for a region without zones.
	Zone string
	// CapacityType is "spot" or "on-demand" (empty means on-demand).
	CapacityType string
	// Architecture is "amd64" (default) or "arm64"; with
	// HyperVGenerations it picks the node image (package nodeimage).
	Architecture string
	// HyperVGenerations are the size's VM generations ("V1", "V2"), from
	// the catalog; empty means ["V2"].
	HyperVGenerations []string

	ImageFamily  string // default Ubuntu
	OSDiskSizeGB int32  // default 128
	MaxPods      int32
	SubnetID     string // default: the provider's configured subnet
	// EphemeralOSDiskPlacement puts the OS disk on the size's local disk
	// (NvmeDisk, CacheDisk or ResourceDisk, from
	// catalog.InstanceType.EphemeralOSDiskPlacement); "" is a managed disk.
	EphemeralOSDiskPlacement string
	// Reservations are the kubelet's reservations for InstanceType at
	// MaxPods, the ones the engine subtracted from its capacity
	// (catalog.InstanceType.Reservations); required: the node's kubelet is
	// started with them.
	Reservations *catalog.Reservations

	// Labels and Taints are delivered to the node via its kubelet flags;
	// so is Kubelet, the AKSNodeClass's kubelet configuration (nil: AKS's
	// defaults).
	Labels  map[string]string
	Taints  []corev1.Taint
	Kubelet *v1beta1.KubeletConfiguration
	// Tags are extra cloud tags (AKSNodeClass spec.tags).
	Tags map[string]string
	// EncryptionAtHost asks for host-based encryption of the VM's disks
	// (AKSNodeClass spec.security.encryptionAtHost).
	EncryptionAtHost bool
	// Sysctls are the AKSNodeClass's spec.linuxOSConfig.sysctls (nil: the
	// node image's defaults).
	Sysctls *v1beta1.SysctlConfiguration
	// GPUMode is the AKSNodeClass's spec.gpu.mode ("" is Driver): whether
	// the node installs the GPU driver (package gpu).
	GPUMode v1beta1.GPUMode
}

// Instance is what the provider knows about a node instance.
type Instance struct {
	Name         string
	ID           string // the provider's resource ID
	ProviderID   string
	InstanceType string
	Zone         string // "<location>-<n>", empty if regional
	CapacityType string
	State        string // Creating, Succeeded, Failed, Deleting
	// ImageID is the image the instance boots, as the provider reports it.
	ImageID string
	Tags    map[string]string
	// NodeClaim is the NodeClaim the instance was created for (from its
	// tags); "" when it carries none.
	NodeClaim string
	CreatedAt time.Time
	// Failure is why a create ended Failed (set by Status only), typed like
	// the errors of BeginVM: an InsufficientCapacityError or a CreateError.
	Failure error
}

// NICStatus is where an instance's network interface stands.
type NICStatus struct {
	ID    string
	State string // Updating, Succeeded, Failed, Deleting
}

// NIC is what garbage collection needs to know about a network interface.
type NIC struct {
	Name string
	// Instance is the instance it was created for (its name without the
	// NIC suffix).
	Instance string
	// VMName is the VM it is attached to ("" when detached).
	VMName string
	Tags   map[string]string
	// NodeClaim is the NodeClaim it was created for (from its tags); ""
	// when it carries none.
	NodeClaim string
	// CreatedAt is zero when the provider does not know it.
	CreatedAt time.Time
}

// Creator begins instance creates and reads instances, never waiting for a
// long-running operation. Errors are typed (see errors.go): from BeginNIC
// and BeginVM an InsufficientCapacityError or a CreateError is a verdict on
// the offering, and a ThrottledError or TransientError says nothing about
// it (the step is repeated later); Status's NodeClaimNotFoundError means
// there is no instance.
type Creator interface {
	// BeginNIC makes sure the NIC for req exists, sending its create when
	// there is none; the VM create waits for State Succeeded.
	BeginNIC(ctx context.Context, req LaunchRequest) (NICStatus, error)
	// BeginVM sends the create of req's instance on NIC nicID.
	BeginVM(ctx context.Context, req LaunchRequest, nicID string) error
	// Status reads the instance named name (Karpenter's Get); a
	// NodeClaimNotFoundError when there is none.
	Status(ctx context.Context, name string) (*Instance, error)
	// BeginDelete sends the delete of the instance (not its NIC).
	BeginDelete(ctx context.Context, name string) error
}

// Deleter deletes an instance and its NIC without waiting: DeleteStep
// sends what delete is due and says whether both are gone; the caller
// looks again later until they are.
type Deleter interface {
	DeleteStep(ctx context.Context, name string) (gone bool, err error)
}

// Lister lists what the cluster owns at the provider.
type Lister interface {
	List(ctx context.Context) ([]*Instance, error)
	ListNICs(ctx context.Context) ([]*NIC, error)
}

// CloudProvider is the whole contract; *azure.Launcher implements it.
type CloudProvider interface {
	Creator
	Deleter
	Lister
}
