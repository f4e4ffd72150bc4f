package azure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
	"github.com/karpfunc/karpfunc/pkg/ownership"
)

// Capacity types, spelled like Karpenter's karpenter.sh/capacity-type values.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// Provisioning states ARM reports for a VM (the contract's, package
// cloudprovider).
const (
	StateCreating  = cloudprovider.StateCreating
	StateSucceeded = cloudprovider.StateSucceeded
	StateFailed    = cloudprovider.StateFailed
	StateDeleting  = cloudprovider.StateDeleting
	// StateUpdating is a NIC's state while it is being created or changed.
	StateUpdating = "Updating"
)

// Image families, the AKSNodeClass spec.imageFamily values.
const (
	ImageFamilyUbuntu     = nodeimage.FamilyUbuntu
	ImageFamilyUbuntu2204 = nodeimage.FamilyUbuntu2204
	ImageFamilyUbuntu2404 = nodeimage.FamilyUbuntu2404
	ImageFamilyAzureLinux = nodeimage.FamilyAzureLinux
)

const (
	defaultOSDiskSizeGB  int32 = 128
	defaultPollFrequency       = 5 * time.Second
	adminUsername              = "azureuser"
	nicSuffix                  = "-nic"
)

// LaunchRequest describes one node VM (package cloudprovider's contract).
type LaunchRequest = cloudprovider.LaunchRequest

// Instance is what we know about a launched VM (package cloudprovider's
// contract). Status sets Failure to the create's classified error.
type Instance = cloudprovider.Instance

// Launcher creates, reads and deletes node VMs and their NICs in the
// cluster's node resource group.
type Launcher struct {
	opts     Options
	vms      *armcompute.VirtualMachinesClient
	nics     *armnetwork.InterfacesClient
	skus     *armcompute.ResourceSKUsClient
	usages   *armcompute.UsageClient
	images   *nodeimage.Resolver
	pollOpts *runtime.PollUntilDoneOptions
	// lbs, nsgs and netCache find the node network (nodenetwork.go).
	lbs      *armnetwork.LoadBalancersClient
	nsgs     *armnetwork.SecurityGroupsClient
	netCache *nodeNetworkCache
	// cred and armOpts are the launcher's ARM connection, for the clients
	// other packages need (MaintenanceConfigurations).
	cred    azcore.TokenCredential
	armOpts *arm.ClientOptions
}

// NewLauncher builds the ARM clients from opts.
func NewLauncher(opts Options) (*Launcher, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	opts.Endpoint = strings.TrimSuffix(opts.Endpoint, "/")
	if opts.PollFrequency <= 0 {
		opts.PollFrequency = defaultPollFrequency
	}
	// azcore refuses to poll more often than once a second (outside its own
	// tests); servers that want faster polling say so with Retry-After.
	opts.PollFrequency = max(opts.PollFrequency, time.Second)

	httpClient := opts.HTTPClient
	if httpClient == nil {
		var err error
		if httpClient, err = newHTTPClient(opts.CACertPEM); err != nil {
			return nil, err
		}
	}

	// The cloud configuration is the public cloud with the ARM endpoint
	// replaced; the audience stays the public one so a real token would
	// still be requested for ARM.
	cfg := cloud.AzurePublic
	cfg.Services = maps.Clone(cloud.AzurePublic.Services)
	rm := cfg.Services[cloud.ResourceManager]
	rm.Endpoint = opts.Endpoint
	cfg.Services[cloud.ResourceManager] = rm

	clientOpts := policy.ClientOptions{Cloud: cfg, Transport: httpClient, Retry: opts.Retry}

	var cred azcore.TokenCredential
	if opts.Token != "" {
		cred = staticToken(opts.Token)
	} else {
		defaultCred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: clientOpts})
		if err != nil {
			return nil, fmt.Errorf("creating Azure credential: %w", err)
		}
		cred = defaultCred
	}

	armOpts := &arm.ClientOptions{
		ClientOptions: clientOpts,
		// Registering resource providers needs subscription-wide rights
		// that our least-privilege identity does not (and should not) have.
		DisableRPRegistration: true,
	}
	armOpts.PerCallPolicies = append(armOpts.PerCallPolicies, telemetryPolicy{}) // spans and metrics, see telemetry.go
	vms, err := armcompute.NewVirtualMachinesClient(opts.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("creating VM client: %w", err)
	}
	nics, err := armnetwork.NewInterfacesClient(opts.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("creating NIC client: %w", err)
	}
	skus, err := armcompute.NewResourceSKUsClient(opts.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("creating resource SKU client: %w", err)
	}
	usages, err := armcompute.NewUsageClient(opts.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("creating usage client: %w", err)
	}
	versions, err := armcompute.NewCommunityGalleryImageVersionsClient(opts.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("creating community gallery image versions client: %w", err)
	}
	images, err := nodeimage.NewResolver(nodeimage.ResolverOptions{Versions: versions, Location: opts.Location,
		Pin: opts.NodeImageVersion, TTL: opts.NodeImageTTL})
	if err != nil {
		return nil, err
	}
	launcher := &Launcher{
		opts:     opts,
		vms:      vms,
		nics:     nics,
		skus:     skus,
		usages:   usages,
		images:   images,
		pollOpts: &runtime.PollUntilDoneOptions{Frequency: opts.PollFrequency},
		cred:     cred,
		armOpts:  armOpts,
	}
	if err := launcher.newNetworkClients(cred, armOpts); err != nil {
		return nil, err
	}
	return launcher, nil
}

// MaintenanceConfigurations is a client of an AKS cluster's planned
// maintenance configurations in subscriptionID, over the launcher's ARM
// connection (endpoint, credential, telemetry).
func (l *Launcher) MaintenanceConfigurations(subscriptionID string) (*armcontainerservice.MaintenanceConfigurationsClient, error) {
	client, err := armcontainerservice.NewMaintenanceConfigurationsClient(subscriptionID, l.cred, l.armOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the maintenance configurations client: %w", err)
	}
	return client, nil
}

func newHTTPClient(caPEM []byte) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(caPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("azure options: CACertPEM contains no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}

// staticToken is a TokenCredential for a fixed bearer token (development
// against the emulator). It never expires from the SDK's point of view.
type staticToken string

func (t staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(t), ExpiresOn: time.Now().Add(24 * time.Hour)}, nil
}

// NICName is the name of the NIC that belongs to VM vmName.
func NICName(vmName string) string { return vmName + nicSuffix }

// Create launches the VM described by req and waits until its create
// finished. It is for tools and tests; the handler never calls it (it uses
// BeginNIC, BeginVM and Status, which never wait).
//
// It is idempotent: an existing VM is returned as is (in whatever state it
// is), an existing NIC is reused. A VM that ARM left in the Failed state is
// deleted first so the launch starts clean. When ARM refuses the VM or its
// create ends Failed, the VM and NIC are deleted again (best effort); an
// error reading the VM's state (throttling, 5xx) is returned as is and
// leaves everything in place: the create may still be running. Errors
// classify with IsCapacityError, IsQuotaError, IsThrottled.
func (l *Launcher) Create(ctx context.Context, req LaunchRequest) (*Instance, error) {
	if err := l.normalise(&req); err != nil {
		return nil, err
	}
	existing, err := l.existingForCreate(ctx, req.Name)
	if existing != nil || err != nil {
		return existing, err
	}
	nic, err := l.awaitNIC(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := l.BeginVM(ctx, req, nic.ID); err != nil {
		if _, refused := AsARMError(err); refused {
			l.cleanupFailedLaunch(ctx, req.Name)
		}
		return nil, err
	}
	return l.awaitVM(ctx, req.Name)
}

// existingForCreate returns the VM named name when Create should return it
// as is; a Failed VM is deleted first and nil returned, as is nil when
// there is no VM.
func (l *Launcher) existingForCreate(ctx context.Context, name string) (*Instance, error) {
	existing, err := l.Status(ctx, name)
	switch {
	case err == nil && strings.EqualFold(existing.State, StateFailed):
		if err := l.Delete(ctx, name); err != nil {
			return nil, fmt.Errorf("deleting failed VM %q before relaunch: %w", name, err)
		}
		return nil, nil
	case err == nil:
		return existing, nil
	case !IsNotFound(err):
		return nil, err
	}
	return nil, nil
}

// awaitNIC puts the launch's NIC until ARM reports it Succeeded.
func (l *Launcher) awaitNIC(ctx context.Context, req LaunchRequest) (NICStatus, error) {
	for wait := l.waiter(); ; {
		nic, err := l.BeginNIC(ctx, req)
		if err != nil {
			return NICStatus{}, err
		}
		if strings.EqualFold(nic.State, StateSucceeded) {
			return nic, nil
		}
		if err := wait(ctx); err != nil {
			return NICStatus{}, fmt.Errorf("waiting for NIC %q: %w", NICName(req.Name), err)
		}
	}
}

// awaitVM reads the VM until its create has ended; one that ended Failed is
// cleaned up and its failure returned.
func (l *Launcher) awaitVM(ctx context.Context, name string) (*Instance, error) {
	for wait := l.waiter(); ; {
		inst, err := l.Status(ctx, name)
		switch {
		case err != nil:
			return nil, err
		case strings.EqualFold(inst.State, StateFailed):
			l.cleanupFailedLaunch(ctx, name)
			return nil, fmt.Errorf("creating VM %q: %w", name, inst.Failure)
		case !strings.EqualFold(inst.State, StateCreating) && inst.State != "":
			return inst, nil
		}
		if err := wait(ctx); err != nil {
			return nil, fmt.Errorf("waiting for VM %q: %w", name, err)
		}
	}
}

// waiter sleeps between Create's reads: 20ms doubling up to PollFrequency.
func (l *Launcher) waiter() func(context.Context) error {
	delay := 20 * time.Millisecond
	return func(ctx context.Context) error {
		timer := time.NewTimer(delay)
		defer timer.Stop()
		delay = min(2*delay, l.opts.PollFrequency)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		}
	}
}

// cleanupFailedLaunch removes what a launch left behind once ARM said no
// for certain (a refused PUT, a create that ended Failed).
func (l *Launcher) cleanupFailedLaunch(ctx context.Context, name string) {
	if ctx.Err() != nil {
		return
	}
	// The cleanup must outlive a caller that gives up right after the error.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	_ = l.Delete(ctx, name)
}

func (l *Launcher) vmFor(ctx context.Context, req LaunchRequest, nicID, customData string) (armcompute.VirtualMachine, error) {
	image, err := l.Image(ctx, req)
	if err != nil {
		return armcompute.VirtualMachine{}, err
	}
	// Password login is off; the deployment's SSH key (normalise checked
	// there is one) is the only way in, as on AKS's own nodes.
	linux := &armcompute.LinuxConfiguration{
		DisablePasswordAuthentication: ptr(true),
		SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
			Path:    ptr("/home/" + adminUsername + "/.ssh/authorized_keys"),
			KeyData: ptr(l.opts.SSHPublicKey),
		}}},
	}
	vm := armcompute.VirtualMachine{
		Location: ptr(l.opts.Location),
		Tags:     buildTags(l.opts.ClusterName, req),
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: ptr(armcompute.VirtualMachineSizeTypes(req.InstanceType))},
			StorageProfile: &armcompute.StorageProfile{
				ImageReference: &armcompute.ImageReference{CommunityGalleryImageID: ptr(image.ID())},
				OSDisk: &armcompute.OSDisk{
					Name:         ptr(req.Name + "-osdisk"),
					CreateOption: ptr(armcompute.DiskCreateOptionTypesFromImage),
					DeleteOption: ptr(armcompute.DiskDeleteOptionTypesDelete),
					DiskSizeGB:   ptr(req.OSDiskSizeGB),
					// StandardSSD works with every VM size; premium storage
					// would need the SKU's PremiumIO capability.
					ManagedDisk: &armcompute.ManagedDiskParameters{StorageAccountType: ptr(armcompute.StorageAccountTypesStandardSSDLRS)},
				},
			},
			OSProfile: &armcompute.OSProfile{
				ComputerName:       ptr(req.Name),
				AdminUsername:      ptr(adminUsername),
				CustomData:         ptr(customData),
				LinuxConfiguration: linux,
			},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{
				ID: ptr(nicID),
				Properties: &armcompute.NetworkInterfaceReferenceProperties{
					Primary: ptr(true),
					// Azure removes the NIC with the VM; Delete still
					// deletes it explicitly for launches that never got a VM.
					DeleteOption: ptr(armcompute.DeleteOptionsDelete),
				},
			}}},
		},
	}
	if req.EphemeralOSDiskPlacement != "" {
		// As the Azure provider sets an ephemeral OS disk: diffDiskSettings
		// Local with the placement, ReadOnly caching, and no storage
		// account type (karpenter-provider-azure@352646f5
		// pkg/providers/instance/vminstance.go:629-638).
		od := vm.Properties.StorageProfile.OSDisk
		od.DiffDiskSettings = &armcompute.DiffDiskSettings{
			Option:    ptr(armcompute.DiffDiskOptionsLocal),
			Placement: ptr(armcompute.DiffDiskPlacement(req.EphemeralOSDiskPlacement)),
		}
		od.Caching = ptr(armcompute.CachingTypesReadOnly)
		od.ManagedDisk = nil
	}
	vm.Identity = nodeIdentity(l.opts.NodeIdentities)
	if req.EncryptionAtHost {
		// As the Azure provider sets it (karpenter-provider-azure@352646f5
		// pkg/providers/instance/vminstance.go:679-683).
		vm.Properties.SecurityProfile = &armcompute.SecurityProfile{EncryptionAtHost: ptr(true)}
	}
	if zone := armZone(req.Zone, l.opts.Location); zone != "" {
		vm.Zones = []*string{ptr(zone)}
	}
	if req.CapacityType == CapacityTypeSpot {
		vm.Properties.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
		vm.Properties.EvictionPolicy = ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		// -1: pay up to the on-demand price, never evicted for price.
		vm.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: ptr(-1.0)}
	}
	return vm, nil
}

// normaliseOffering checks the request's NodePool, instance type,
// capacity type (default on-demand), zone and subnet (default the
// configured one).
func (l *Launcher) normaliseOffering(req *LaunchRequest) error {
	if req.NodePool == "" {
		return NewInvalidRequestError("launch %q: NodePool is required (it is tagged on the VM)", req.Name)
	}
	if req.InstanceType == "" {
		return NewInvalidRequestError("launch %q: InstanceType is required", req.Name)
	}
	switch req.CapacityType {
	case "":
		req.CapacityType = CapacityTypeOnDemand
	case CapacityTypeSpot, CapacityTypeOnDemand:
	default:
		return NewInvalidRequestError("launch %q: capacity type %q is not %q or %q", req.Name, req.CapacityType, CapacityTypeSpot, CapacityTypeOnDemand)
	}
	if req.Zone != "" && armZone(req.Zone, l.opts.Location) == "" {
		return NewInvalidRequestError("launch %q: zone %q is not of the form %q", req.Name, req.Zone, strings.ToLower(l.opts.Location)+"-<n>")
	}
	if req.SubnetID == "" {
		req.SubnetID = l.opts.SubnetID
	}
	if req.SubnetID == "" {
		return NewInvalidRequestError("launch %q: no SubnetID in the request and no default subnet configured", req.Name)
	}
	return nil
}

// normalise validates req and fills in defaults, so a bad request fails
// before any ARM call with a message naming the field.
func (l *Launcher) normalise(req *LaunchRequest) error {
	if err := validateVMName(req.Name); err != nil {
		return err
	}
	if req.NodeClaim == "" {
		req.NodeClaim = req.Name
	}
	if l.opts.SSHPublicKey == "" {
		return NewInvalidRequestError("launch %q: no SSH public key configured (Options.SSHPublicKey, app setting %s); Azure refuses a Linux VM with password login disabled and no key", req.Name, EnvSSHPublicKey)
	}
	if err := l.normaliseOffering(req); err != nil {
		return err
	}
	if req.OSDiskSizeGB < 0 {
		return NewInvalidRequestError("launch %q: OSDiskSizeGB %d is negative", req.Name, req.OSDiskSizeGB)
	}
	if req.OSDiskSizeGB == 0 {
		req.OSDiskSizeGB = defaultOSDiskSizeGB
	}
	switch req.EphemeralOSDiskPlacement {
	case "", string(armcompute.DiffDiskPlacementNvmeDisk), string(armcompute.DiffDiskPlacementCacheDisk), string(armcompute.DiffDiskPlacementResourceDisk):
	default:
		return NewInvalidRequestError("launch %q: ephemeral OS disk placement %q is not NvmeDisk, CacheDisk or ResourceDisk", req.Name, req.EphemeralOSDiskPlacement)
	}
	if req.MaxPods < 0 {
		return NewInvalidRequestError("launch %q: MaxPods %d is negative", req.Name, req.MaxPods)
	}
	if err := l.checkPodIPs(*req); err != nil {
		return err
	}
	if req.Architecture != "" && req.Architecture != "amd64" && req.Architecture != "arm64" {
		return NewInvalidRequestError("launch %q: architecture %q is not amd64 or arm64", req.Name, req.Architecture)
	}
	if err := nodeimage.Supports(req.ImageFamily, req.Architecture, l.generations(*req)); err != nil {
		return NewInvalidRequestError("launch %q as %s: %v", req.Name, req.InstanceType, err)
	}
	return nil
}

// armZone turns the Kubernetes zone "<location>-<n>" into ARM's "<n>"; it
// returns "" when zone does not belong to location or is malformed.
func armZone(zone, location string) string {
	if zone == "" {
		return ""
	}
	prefix := strings.ToLower(location) + "-"
	if !strings.HasPrefix(strings.ToLower(zone), prefix) {
		return ""
	}
	number := zone[len(prefix):]
	if number == "" || strings.Trim(number, "0123456789") != "" {
		return ""
	}
	return number
}

// Image is the node image req's VM boots: its image family, architecture
// and Hyper-V generations and the Kubernetes version nodes join at pick the
// image definition (package nodeimage); its version is the pinned
// NodeImageVersion or the gallery's current one. A family AKS does not
// offer at that Kubernetes version is an InvalidRequestError.
func (l *Launcher) Image(ctx context.Context, req LaunchRequest) (nodeimage.Image, error) {
	want, err := l.imageWant(ctx, req)
	if err != nil {
		return nodeimage.Image{}, err
	}
	return l.images.Resolve(ctx, want)
}

// imageWant is what picks req's image definition; the error says why req
// has none at the cluster's Kubernetes version.
func (l *Launcher) imageWant(ctx context.Context, req LaunchRequest) (nodeimage.Want, error) {
	kube, err := l.kubernetesVersion(ctx)
	if err != nil {
		return nodeimage.Want{}, fmt.Errorf("launch %q: reading the cluster's Kubernetes version: %w", req.Name, err)
	}
	want := nodeimage.Want{Family: req.ImageFamily, Architecture: req.Architecture, Generations: l.generations(req), KubernetesVersion: kube}
	if _, err := nodeimage.Definition(want); err != nil {
		return nodeimage.Want{}, NewInvalidRequestError("launch %q as %s: %v", req.Name, req.InstanceType, err)
	}
	return want, nil
}

// kubernetesVersion is the version nodes join at: Options.KubernetesVersion
// when set, else the bootstrap's.
func (l *Launcher) kubernetesVersion(ctx context.Context) (string, error) {
	if l.opts.KubernetesVersion != nil {
		return l.opts.KubernetesVersion(ctx)
	}
	if l.opts.Bootstrap == nil {
		return "", fmt.Errorf("no node bootstrap configured")
	}
	return l.opts.Bootstrap.KubernetesVersion, nil
}

func (l *Launcher) generations(req LaunchRequest) []string {
	if len(req.HyperVGenerations) == 0 {
		return []string{nodeimage.GenerationV2}
	}
	return req.HyperVGenerations
}

// Images is the launcher's node image resolver: what drift compares
// NodeClaims' status.imageID with, and what the AKSNodeClass status can
// report per (family, architecture, generation).
func (l *Launcher) Images() *nodeimage.Resolver { return l.images }

// Get returns the VM called name; IsNotFound(err) when there is none.
func (l *Launcher) Get(ctx context.Context, name string) (*Instance, error) {
	if err := validateVMName(name); err != nil {
		return nil, err
	}
	res, err := l.vms.Get(ctx, l.opts.ResourceGroup, name, nil)
	if err != nil {
		return nil, wrapARM(err, "getting VM %q", name)
	}
	return l.toInstance(&res.VirtualMachine), nil
}

// Delete deletes the VM called name, then its NIC, waiting for both. It is
// idempotent: what is already gone counts as deleted.
func (l *Launcher) Delete(ctx context.Context, name string) error {
	if err := validateVMName(name); err != nil {
		return err
	}
	vmPoller, err := l.vms.BeginDelete(ctx, l.opts.ResourceGroup, name, nil)
	if err != nil && !IsNotFound(err) {
		return wrapARM(err, "deleting VM %q", name)
	}
	if err == nil {
		if _, err := vmPoller.PollUntilDone(ctx, l.pollOpts); err != nil && !IsNotFound(err) {
			return wrapARM(err, "deleting VM %q", name)
		}
	}
	// The NIC can only go once no VM references it, hence the order.
	nic := NICName(name)
	nicPoller, err := l.nics.BeginDelete(ctx, l.opts.ResourceGroup, nic, nil)
	if err != nil && !IsNotFound(err) {
		return wrapARM(err, "deleting NIC %q", nic)
	}
	if err == nil {
		if _, err := nicPoller.PollUntilDone(ctx, l.pollOpts); err != nil && !IsNotFound(err) {
			return wrapARM(err, "deleting NIC %q", nic)
		}
	}
	return nil
}

// List returns the VMs in the node resource group karpfunc made for this
// cluster (TagCluster and TagManagedBy).
func (l *Launcher) List(ctx context.Context) ([]*Instance, error) {
	out, err := l.list(ctx)
	return out, classifyRead(err, false)
}

func (l *Launcher) list(ctx context.Context) ([]*Instance, error) {
	var out []*Instance
	pager := l.vms.NewListPager(l.opts.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, wrapARM(err, "listing VMs in %q", l.opts.ResourceGroup)
		}
		for _, vm := range page.Value {
			if vm == nil || !l.ours(vm.Tags) {
				continue
			}
			out = append(out, l.toInstance(vm))
		}
	}
	return out, nil
}

// ListSKUs returns the resource SKUs ARM offers in the launcher's location
// (the input for refreshing the instance-type catalog).
func (l *Launcher) ListSKUs(ctx context.Context) ([]*armcompute.ResourceSKU, error) {
	var out []*armcompute.ResourceSKU
	pager := l.skus.NewListPager(&armcompute.ResourceSKUsClientListOptions{
		Filter: ptr(fmt.Sprintf("location eq '%s'", l.opts.Location)),
	})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, wrapARM(err, "listing resource SKUs in %q", l.opts.Location)
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

func (l *Launcher) toInstance(vm *armcompute.VirtualMachine) *Instance {
	name := deref(vm.Name)
	in := &Instance{
		Name:         name,
		ID:           deref(vm.ID),
		ProviderID:   ProviderID(l.opts.SubscriptionID, l.opts.ResourceGroup, name),
		CapacityType: CapacityTypeOnDemand,
		Tags:         fromTags(vm.Tags),
	}
	in.NodeClaim = in.Tags[TagNodeClaim]
	if len(vm.Zones) > 0 && deref(vm.Zones[0]) != "" {
		loc := deref(vm.Location)
		if loc == "" {
			loc = l.opts.Location
		}
		in.Zone = strings.ToLower(loc) + "-" + deref(vm.Zones[0])
	}
	if props := vm.Properties; props != nil {
		if props.HardwareProfile != nil {
			in.InstanceType = string(deref(props.HardwareProfile.VMSize))
		}
		if deref(props.Priority) == armcompute.VirtualMachinePriorityTypesSpot {
			in.CapacityType = CapacityTypeSpot
		}
		in.State = deref(props.ProvisioningState)
		if sp := props.StorageProfile; sp != nil && sp.ImageReference != nil {
			in.ImageID = deref(sp.ImageReference.CommunityGalleryImageID)
		}
		in.CreatedAt = deref(props.TimeCreated)
	}
	return in
}

// NIC is what the sweep needs to know about a network interface (package
// cloudprovider's contract); CreatedAt is from the TagCreated tag.
type NIC = cloudprovider.NIC

// ListNICs returns the NICs in the node resource group karpfunc made for
// this cluster (TagCluster and TagManagedBy).
func (l *Launcher) ListNICs(ctx context.Context) ([]*NIC, error) {
	out, err := l.listNICs(ctx)
	return out, classifyRead(err, false)
}

func (l *Launcher) listNICs(ctx context.Context) ([]*NIC, error) {
	var out []*NIC
	pager := l.nics.NewListPager(l.opts.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, wrapARM(err, "listing NICs in %q", l.opts.ResourceGroup)
		}
		for _, armNIC := range page.Value {
			if armNIC == nil || !l.ours(armNIC.Tags) {
				continue
			}
			nic := &NIC{Name: deref(armNIC.Name), Tags: fromTags(armNIC.Tags)}
			nic.Instance = VMNameForNIC(nic.Name)
			nic.NodeClaim = nic.Tags[TagNodeClaim]
			if props := armNIC.Properties; props != nil && props.VirtualMachine != nil && props.VirtualMachine.ID != nil {
				id := *props.VirtualMachine.ID
				nic.VMName = id[strings.LastIndex(id, "/")+1:]
			}
			if created, err := time.Parse(time.RFC3339, nic.Tags[TagCreated]); err == nil {
				nic.CreatedAt = created
			}
			out = append(out, nic)
		}
	}
	return out, nil
}

// ours reports whether a resource's tags say karpfunc made it for this cluster.
func (l *Launcher) ours(tags map[string]*string) bool {
	return deref(tags[TagCluster]) == l.opts.ClusterName && deref(tags[TagManagedBy]) == ownership.Value
}

// VMNameForNIC is the VM a NIC named by NICName belongs to.
func VMNameForNIC(nic string) string { return strings.TrimSuffix(nic, nicSuffix) }
