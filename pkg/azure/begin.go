package azure

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// The launch primitives below never wait for a long-running operation: each
// sends at most one write and returns, and the caller observes completion
// later with Status. A Functions invocation therefore lasts as long as a few
// ARM round trips, however long Azure takes to create the VM.

// NICStatus is where a node VM's network interface stands (package
// cloudprovider's contract).
type NICStatus = cloudprovider.NICStatus

// Launcher implements the provider contract; its errors are typed there
// (classify.go), with the ARMError kept underneath.
var _ cloudprovider.CloudProvider = (*Launcher)(nil)

// BeginNIC makes sure the NIC for req exists (see beginNIC); errors are
// typed by classifyCreate.
func (l *Launcher) BeginNIC(ctx context.Context, req LaunchRequest) (NICStatus, error) {
	nic, err := l.beginNIC(ctx, req)
	return nic, classifyCreate(err, requestOffering(req))
}

// BeginVM sends the VM create for req (see beginVM); errors are typed by
// classifyCreate.
func (l *Launcher) BeginVM(ctx context.Context, req LaunchRequest, nicID string) error {
	return classifyCreate(l.beginVM(ctx, req, nicID), requestOffering(req))
}

// Status reads the VM called name with its instance view (see status);
// errors are typed by classifyRead, a missing VM a NodeClaimNotFoundError.
func (l *Launcher) Status(ctx context.Context, name string) (*Instance, error) {
	in, err := l.status(ctx, name)
	return in, classifyRead(err, true)
}

// BeginDelete starts deleting the VM called name (see beginDelete); errors
// are typed by classifyRead.
func (l *Launcher) BeginDelete(ctx context.Context, name string) error {
	return classifyRead(l.beginDelete(ctx, name), false)
}

// DeleteStep moves the deletion of the VM called name and its NIC on (see
// deleteStep); errors are typed by classifyRead.
func (l *Launcher) DeleteStep(ctx context.Context, name string) (gone bool, err error) {
	gone, err = l.deleteStep(ctx, name)
	return gone, classifyRead(err, false)
}

// beginNIC makes sure the NIC for req exists: it GETs it and, when there is
// none, sends the create and returns without waiting. The VM PUT must wait
// for State Succeeded: ARM refuses a VM that references a NIC still being
// provisioned (RetryableError, ReferencedResourceNotProvisioned).
func (l *Launcher) beginNIC(ctx context.Context, req LaunchRequest) (NICStatus, error) {
	if err := l.normalise(&req); err != nil {
		return NICStatus{}, err
	}
	// The node bootstrap is checked first, so that missing settings fail
	// the launch before anything exists in Azure.
	if _, err := l.customData(ctx, req); err != nil {
		return NICStatus{}, err
	}
	if _, err := l.imageWant(ctx, req); err != nil {
		return NICStatus{}, err
	}
	name := NICName(req.Name)
	got, err := l.nics.Get(ctx, l.opts.ResourceGroup, name, nil)
	switch {
	case err == nil && !strings.EqualFold(nicStatus(&got.Interface, l.opts, name).State, StateFailed):
		return nicStatus(&got.Interface, l.opts, name), nil
	case err == nil:
		// A NIC left Failed is put again: ARM's documented way back to
		// Succeeded (the resource itself is usually fine).
	case !IsNotFound(err):
		return NICStatus{}, wrapARM(err, "getting NIC %q", name)
	}
	nn, err := l.NodeNetworkFor(ctx, req.SubnetID)
	if err != nil {
		return NICStatus{}, err
	}
	nic := l.nicFor(req)
	withNodeNetwork(&nic, nn)
	if _, err := l.nics.BeginCreateOrUpdate(ctx, l.opts.ResourceGroup, name, nic, nil); err != nil {
		l.forgetNodeNetwork(err, nn)
		return NICStatus{}, wrapARM(err, "creating NIC %q", name)
	}
	// One GET instead of a poll: NICs usually finish within the PUT, and
	// then the VM can be sent in the same invocation.
	got, err = l.nics.Get(ctx, l.opts.ResourceGroup, name, nil)
	if err != nil {
		// The create was accepted; its state is simply not known yet.
		return NICStatus{ID: NICResourceID(l.opts.SubscriptionID, l.opts.ResourceGroup, name), State: StateUpdating}, nil
	}
	return nicStatus(&got.Interface, l.opts, name), nil
}

func nicStatus(n *armnetwork.Interface, opts Options, name string) NICStatus {
	st := NICStatus{ID: deref(n.ID)}
	if st.ID == "" {
		st.ID = NICResourceID(opts.SubscriptionID, opts.ResourceGroup, name)
	}
	if n.Properties != nil && n.Properties.ProvisioningState != nil {
		st.State = string(*n.Properties.ProvisioningState)
	}
	return st
}

func (l *Launcher) nicFor(req LaunchRequest) armnetwork.Interface {
	return armnetwork.Interface{
		Location: ptr(l.opts.Location),
		Tags:     buildTags(l.opts.ClusterName, req),
		Properties: &armnetwork.InterfacePropertiesFormat{
			IPConfigurations: l.ipConfigurations(req),
		},
	}
}

// beginVM sends the VM create for req, attached to NIC nicID, and returns
// once ARM accepted it (the VM is then Creating). A synchronous refusal
// (SkuNotAvailable, quota, InvalidParameter, throttling) is returned as an
// error that classifies with IsCapacityError, IsQuotaError, IsThrottled.
func (l *Launcher) beginVM(ctx context.Context, req LaunchRequest, nicID string) error {
	if err := l.normalise(&req); err != nil {
		return err
	}
	customData, err := l.customData(ctx, req)
	if err != nil {
		return err
	}
	vm, err := l.vmFor(ctx, req, nicID, customData)
	if err != nil {
		return err
	}
	if _, err := l.vms.BeginCreateOrUpdate(ctx, l.opts.ResourceGroup, req.Name, vm, nil); err != nil {
		return l.imageGone(wrapARM(err, "creating VM %q", req.Name), vm)
	}
	return nil
}

// imageGone: when ARM says the VM's node image version is not in the
// gallery (AKS removed it), the cached version is dropped so the next
// launch resolves again; a pinned version gets a hint, as only a new pin
// (or none) can fix it.
func (l *Launcher) imageGone(err error, vm armcompute.VirtualMachine) error {
	ae, ok := AsARMError(err)
	if !ok || ae.Code != "GalleryImageNotFound" {
		return err
	}
	img, ok := nodeimage.Parse(deref(vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID))
	if !ok {
		return err
	}
	if pin := l.images.Pinned(); pin != "" {
		return fmt.Errorf("%w (node image version %s is pinned by %s and AKS's gallery no longer holds it: "+
			"unset the setting to follow the gallery, or pin a current version)", err, pin, EnvNodeImageVersion)
	}
	l.images.Forget(img)
	return err
}

// status GETs the VM called name with its instance view. For a VM whose
// create failed, Instance.Failure is the error ARM recorded (the instance
// view's ProvisioningState/failed/<code> status). IsNotFound(err) when there
// is no such VM. Any other error (throttling, 5xx, transport) says nothing
// about the VM: it may well still be creating.
func (l *Launcher) status(ctx context.Context, name string) (*Instance, error) {
	if err := validateVMName(name); err != nil {
		return nil, err
	}
	res, err := l.vms.Get(ctx, l.opts.ResourceGroup, name, &armcompute.VirtualMachinesClientGetOptions{
		Expand: ptr(armcompute.InstanceViewTypesInstanceView)})
	if err != nil {
		return nil, wrapARM(err, "getting VM %q", name)
	}
	in := l.toInstance(&res.VirtualMachine)
	if strings.EqualFold(in.State, StateFailed) {
		in.Failure = classifyFailure(provisioningFailure(&res.VirtualMachine), in)
	}
	return in, nil
}

// provisioningFailure reads the failed create's error from the instance
// view; a VM in state Failed without one gets code ProvisioningFailed.
func provisioningFailure(vm *armcompute.VirtualMachine) *ARMError {
	const prefix = "ProvisioningState/failed/"
	if props := vm.Properties; props != nil && props.InstanceView != nil {
		for _, status := range props.InstanceView.Statuses {
			code := deref(status.Code)
			if len(code) > len(prefix) && strings.EqualFold(code[:len(prefix)], prefix) {
				return &ARMError{Code: code[len(prefix):], Message: deref(status.Message)}
			}
		}
	}
	return &ARMError{Code: CodeProvisioningFailed, Message: fmt.Sprintf("VM %q is in provisioning state Failed", deref(vm.Name))}
}

// beginDelete starts deleting the VM called name and returns without
// waiting; its NIC goes with it (deleteOption Delete). What is already gone
// counts as deleted.
func (l *Launcher) beginDelete(ctx context.Context, name string) error {
	if err := validateVMName(name); err != nil {
		return err
	}
	if _, err := l.vms.BeginDelete(ctx, l.opts.ResourceGroup, name, nil); err != nil && !IsNotFound(err) {
		return wrapARM(err, "deleting VM %q", name)
	}
	return nil
}

// deleteStep moves the deletion of the VM called name and its NIC one step
// on without waiting, and reports whether both are gone: a VM that exists
// and is not already Deleting gets its delete sent; once the VM is gone, a
// NIC left behind (the VM never got it, or predates deleteOption Delete)
// gets its delete sent. The caller looks again later until gone is true.
// What is already gone counts as deleted.
func (l *Launcher) deleteStep(ctx context.Context, name string) (gone bool, err error) {
	if err := validateVMName(name); err != nil {
		return false, err
	}
	vm, err := l.vms.Get(ctx, l.opts.ResourceGroup, name, nil)
	switch {
	case err == nil:
		if in := l.toInstance(&vm.VirtualMachine); !strings.EqualFold(in.State, StateDeleting) {
			if _, err := l.vms.BeginDelete(ctx, l.opts.ResourceGroup, name, nil); err != nil && !IsNotFound(err) {
				return false, wrapARM(err, "deleting VM %q", name)
			}
		}
		return false, nil
	case !IsNotFound(err):
		return false, wrapARM(err, "getting VM %q", name)
	}
	nicName := NICName(name)
	nic, err := l.nics.Get(ctx, l.opts.ResourceGroup, nicName, nil)
	switch {
	case IsNotFound(err):
		return true, nil
	case err != nil:
		return false, wrapARM(err, "getting NIC %q", nicName)
	}
	if !strings.EqualFold(nicStatus(&nic.Interface, l.opts, nicName).State, StateDeleting) {
		if _, err := l.nics.BeginDelete(ctx, l.opts.ResourceGroup, nicName, nil); err != nil && !IsNotFound(err) {
			return false, wrapARM(err, "deleting NIC %q", nicName)
		}
	}
	return false, nil
}
