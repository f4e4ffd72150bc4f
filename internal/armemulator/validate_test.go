package armemulator

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// strictSKUs are the sizes of the refusal tests: a Gen1-only x64 size, a
// Gen1+Gen2 x64 size offered in zones 1 and 2, and an Arm64 Gen2 size.
func strictSKUs() []*armcompute.ResourceSKU {
	sku := func(name, gens, arch string, zones ...string) *armcompute.ResourceSKU {
		info := &armcompute.ResourceSKULocationInfo{Location: ptr(loc)}
		for _, z := range zones {
			info.Zones = append(info.Zones, ptr(z))
		}
		return &armcompute.ResourceSKU{Name: ptr(name), ResourceType: ptr("virtualMachines"), Locations: []*string{ptr(loc)},
			LocationInfo: []*armcompute.ResourceSKULocationInfo{info},
			Capabilities: []*armcompute.ResourceSKUCapabilities{
				{Name: ptr("vCPUs"), Value: ptr("2")}, {Name: ptr("MemoryGB"), Value: ptr("8")},
				{Name: ptr("HyperVGenerations"), Value: ptr(gens)}, {Name: ptr("CpuArchitectureType"), Value: ptr(arch)},
			}}
	}
	// Standard_D2s_v3's local disks as the SKU API reports them: a 50 GiB
	// cache disk, a 16 GiB resource disk.
	d2sv3 := sku("Standard_D2s_v3", "V1,V2", "x64", "1", "2", "3")
	d2sv3.Capabilities = append(d2sv3.Capabilities, &armcompute.ResourceSKUCapabilities{Name: ptr("CachedDiskBytes"), Value: ptr("53687091200")},
		&armcompute.ResourceSKUCapabilities{Name: ptr("MaxResourceVolumeMB"), Value: ptr("16384")},
		&armcompute.ResourceSKUCapabilities{Name: ptr("EphemeralOSDiskSupported"), Value: ptr("True")})
	// Standard_D2s_v5 has no local disk and no ephemeral OS disk.
	d2sv5 := sku("Standard_D2s_v5", "V1,V2", "x64", "1", "2")
	d2sv5.Capabilities = append(d2sv5.Capabilities, &armcompute.ResourceSKUCapabilities{Name: ptr("EphemeralOSDiskSupported"), Value: ptr("False")})
	return []*armcompute.ResourceSKU{
		d2sv3,
		sku("Standard_D2_v3", "V1", "x64", "1", "2", "3"),
		d2sv5,
		sku("Standard_D2ps_v5", "V2", "Arm64", "1", "2", "3"),
	}
}

func testSSHKey(t *testing.T) string {
	t.Helper()
	key, err := azure.GenerateSSHPublicKey("emulator-test")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func image(t *testing.T, family, arch string, gen string) string {
	t.Helper()
	img, err := nodeimage.Select(nodeimage.Want{Family: family, Architecture: arch, Generations: []string{gen}, KubernetesVersion: "1.33.2"},
		nodeimage.ExampleVersion)
	if err != nil {
		t.Fatal(err)
	}
	return img.ID()
}

// goodVM is a VM every check accepts; each test row breaks one thing.
func goodVM(t *testing.T, nicID string) armcompute.VirtualMachine {
	vm := vmBody(nicID, base64.StdEncoding.EncodeToString([]byte("#cloud-config\n")))
	vm.Properties.StorageProfile = &armcompute.StorageProfile{ImageReference: &armcompute.ImageReference{
		CommunityGalleryImageID: ptr(image(t, "Ubuntu2204", "amd64", "V2"))}}
	vm.Properties.OSProfile.AdminUsername = ptr("azureuser")
	vm.Properties.OSProfile.LinuxConfiguration = &armcompute.LinuxConfiguration{
		DisablePasswordAuthentication: ptr(true),
		SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
			Path: ptr("/home/azureuser/.ssh/authorized_keys"), KeyData: ptr(testSSHKey(t))}}},
	}
	vm.Tags = map[string]*string{"karpenter.azure.com_cluster": ptr("c")}
	return vm
}

// TestVMRefusals sends one VM create per ARM refusal through the real
// armcompute client and checks ARM's code and message.
func TestVMRefusals(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, SKUs: strictSKUs(), Subnets: []string{testSubnetID}})
	vms, nics := clients(t, s)
	ctx := context.Background()
	p, err := nics.BeginCreateOrUpdate(ctx, rg, "nic-1", nicBody(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	nicID := azure.NICResourceID(sub, rg, "nic-1")
	manyTags := map[string]*string{}
	for i := range 51 {
		manyTags[fmt.Sprintf("tag%02d", i)] = ptr("v")
	}

	for _, tc := range []struct {
		name     string
		change   func(*armcompute.VirtualMachine)
		status   int
		code     string
		contains string
	}{
		{"unknown size", func(vm *armcompute.VirtualMachine) {
			vm.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes("Standard_Nope_v9"))
		}, 409, "SkuNotAvailable", "Standard_Nope_v9"},
		{"zone the size is not offered in", func(vm *armcompute.VirtualMachine) { vm.Zones = []*string{ptr("3")} }, 409, "SkuNotAvailable", "zones '3'"},
		{"zone the region does not have", func(vm *armcompute.VirtualMachine) { vm.Zones = []*string{ptr("7")} }, 409, "SkuNotAvailable", "zones '7'"},
		{"gen2 image on a gen1-only size", func(vm *armcompute.VirtualMachine) {
			vm.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes("Standard_D2_v3"))
		}, 400, "BadRequest", "cannot boot Hypervisor Generation '2'"},
		{"arm64 image on an x64 size", func(vm *armcompute.VirtualMachine) {
			vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID = ptr(image(t, "Ubuntu2204", "arm64", "V2"))
		}, 400, "BadRequest", "CPU architecture 'Arm64'"},
		{"image version the gallery no longer holds", func(vm *armcompute.VirtualMachine) {
			vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID = ptr(strings.Replace(image(t, "Ubuntu2204", "amd64", "V2"),
				nodeimage.ExampleVersion, "202401.01.0", 1))
		}, 404, "GalleryImageNotFound", "versions/202401.01.0 is not available in"},
		{"password login disabled and no SSH key", func(vm *armcompute.VirtualMachine) {
			vm.Properties.OSProfile.LinuxConfiguration.SSH = nil
		}, 400, "InvalidParameter", "Authentication using either SSH or by user name and password must be enabled in Linux profile."},
		{"password login enabled and no password", func(vm *armcompute.VirtualMachine) {
			vm.Properties.OSProfile.LinuxConfiguration.DisablePasswordAuthentication = ptr(false)
		}, 400, "InvalidParameter", "adminPassword"},
		{"SSH key that is not a key", func(vm *armcompute.VirtualMachine) {
			vm.Properties.OSProfile.LinuxConfiguration.SSH.PublicKeys[0].KeyData = ptr("ssh-rsa bm90IGEga2V5")
		}, 400, "InvalidParameter", "keyData is invalid"},
		{"customData over 87380 characters", func(vm *armcompute.VirtualMachine) {
			vm.Properties.OSProfile.CustomData = ptr(base64.StdEncoding.EncodeToString(make([]byte, 65536)))
		}, 400, "InvalidParameter", "maximum length of 87380 characters"},
		{"eviction policy on a regular VM", func(vm *armcompute.VirtualMachine) {
			vm.Properties.EvictionPolicy = ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		}, 400, "InvalidParameter", "Eviction policy can be set only on Azure Spot"},
		{"max price on a regular VM", func(vm *armcompute.VirtualMachine) {
			vm.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: ptr(-1.0)}
		}, 400, "InvalidParameter", "Billing profile can be set only on Azure Spot"},
		{"spot max price of zero", func(vm *armcompute.VirtualMachine) {
			vm.Properties.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
			vm.Properties.EvictionPolicy = ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
			vm.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: ptr(0.0)}
		}, 400, "InvalidParameter", "billingProfile.maxPrice"},
		{"51 tags", func(vm *armcompute.VirtualMachine) { vm.Tags = manyTags }, 400, "InvalidTagCount", "maximum of 50"},
		{"tag name of 513 characters", func(vm *armcompute.VirtualMachine) {
			vm.Tags = map[string]*string{strings.Repeat("n", 513): ptr("v")}
		}, 400, "InvalidTagNameLength", "'512'"},
		{"tag value of 257 characters", func(vm *armcompute.VirtualMachine) {
			vm.Tags = map[string]*string{"k": ptr(strings.Repeat("v", 257))}
		}, 400, "InvalidTagValueLength", "'256'"},
		{"ephemeral OS disk bigger than the cache disk", func(vm *armcompute.VirtualMachine) {
			ephemeral(vm, 64, nil)
		}, 400, "NotSupported", "OS disk of Ephemeral VM with size greater than 50 GB is not allowed for VM size Standard_D2s_v3 when the DiffDiskPlacement is CacheDisk."},
		{"ephemeral OS disk bigger than the resource disk", func(vm *armcompute.VirtualMachine) {
			ephemeral(vm, 30, ptr(armcompute.DiffDiskPlacementResourceDisk))
		}, 400, "NotSupported", "greater than 16 GB is not allowed for VM size Standard_D2s_v3 when the DiffDiskPlacement is ResourceDisk"},
		{"ephemeral OS disk on an NVMe disk the size lacks", func(vm *armcompute.VirtualMachine) {
			ephemeral(vm, 30, ptr(armcompute.DiffDiskPlacementNvmeDisk))
		}, 400, "NotSupported", "The Diff Disk Placement of type 'NvmeDisk' is not supported for VM size Standard_D2s_v3."},
		{"ephemeral OS disk on a size without ephemeral OS disks", func(vm *armcompute.VirtualMachine) {
			ephemeral(vm, 30, nil)
			vm.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes("Standard_D2s_v5"))
		}, 400, "NotSupported", "The Diff Disk Placement of type 'ResourceDisk' is not supported for VM size Standard_D2s_v5."},
		{"tag name with a reserved character", func(vm *armcompute.VirtualMachine) {
			vm.Tags = map[string]*string{"a/b": ptr("v")}
		}, 400, "InvalidTagNameCharacters", "a/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := goodVM(t, nicID)
			tc.change(&vm)
			_, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vm, nil)
			var re *azcore.ResponseError
			if err == nil || !asResponseError(err, &re) {
				t.Fatalf("create = %v, want %d %s", err, tc.status, tc.code)
			}
			if re.StatusCode != tc.status || re.ErrorCode != tc.code || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("create = %d %s %v\nwant %d %s containing %q", re.StatusCode, re.ErrorCode, err, tc.status, tc.code, tc.contains)
			}
		})
	}
	if c := s.Counters(); c.VMCreates != 0 {
		t.Fatalf("%d VMs created by refused requests", c.VMCreates)
	}

	// What the refusals leave alone is accepted: the control row proves
	// the rows above fail for their own reason.
	for _, tc := range []struct {
		name   string
		change func(*armcompute.VirtualMachine)
	}{
		{"gen2 image on a gen1+gen2 size", func(*armcompute.VirtualMachine) {}},
		{"gen1 image on a gen1-only size", func(vm *armcompute.VirtualMachine) {
			vm.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes("Standard_D2_v3"))
			vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID = ptr(image(t, "Ubuntu2204", "amd64", "V1"))
		}},
		{"spot with ARM's defaults", func(vm *armcompute.VirtualMachine) {
			vm.Properties.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
		}},
		{"ephemeral OS disk that fills the cache disk", func(vm *armcompute.VirtualMachine) { ephemeral(vm, 50, nil) }},
	} {
		t.Run("accepts "+tc.name, func(t *testing.T) {
			vm := goodVM(t, nicID)
			tc.change(&vm)
			p, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-ok", vm, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.PollUntilDone(ctx, nil); err != nil {
				t.Fatal(err)
			}
			dp, err := vms.BeginDelete(ctx, rg, "vm-ok", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dp.PollUntilDone(ctx, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNICRefusals checks the subnet reference and the tag limits of a NIC
// create through the real armnetwork client.
func TestNICRefusals(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, SKUs: strictSKUs(), Subnets: []string{testSubnetID}})
	_, nics := clients(t, s)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		change   func(*armnetwork.Interface)
		code     string
		contains string
	}{
		{"malformed subnet ID", func(n *armnetwork.Interface) {
			n.Properties.IPConfigurations[0].Properties.Subnet.ID = ptr("/subscriptions/x/subnets/y")
		}, "LinkedInvalidPropertyId", "properties.ipConfigurations[0].properties.subnet.id"},
		{"subnet that does not exist", func(n *armnetwork.Interface) {
			n.Properties.IPConfigurations[0].Properties.Subnet.ID = ptr(strings.Replace(testSubnetID, "/subnets/nodes", "/subnets/other", 1))
		}, "InvalidResourceReference", "subnets/other referenced by resource"},
		{"tag value of 257 characters", func(n *armnetwork.Interface) {
			n.Tags = map[string]*string{"k": ptr(strings.Repeat("v", 257))}
		}, "InvalidTagValueLength", "'256'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nicBody()
			tc.change(&n)
			_, err := nics.BeginCreateOrUpdate(ctx, rg, "nic-x", n, nil)
			var re *azcore.ResponseError
			if err == nil || !asResponseError(err, &re) || re.StatusCode != 400 || re.ErrorCode != tc.code || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("create = %v, want 400 %s containing %q", err, tc.code, tc.contains)
			}
		})
	}
	if c := s.Counters(); c.NICCreates != 0 {
		t.Fatalf("%d NICs created by refused requests", c.NICCreates)
	}
}

// TestSDKAPIVersionsAccepted: the versions the pinned SDK modules send are
// served (a refused one would fail these calls), including the SKU list.
func TestSDKAPIVersionsAccepted(t *testing.T) {
	s := start(t, Options{SKUs: strictSKUs()})
	skus, err := armcompute.NewResourceSKUsClient(sub, token(s.Token()), armOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	pager := skus.NewListPager(nil)
	page, err := pager.NextPage(context.Background())
	if err != nil || len(page.Value) != len(strictSKUs()) {
		t.Fatalf("SKU list: %v, %d SKUs", err, len(page.Value))
	}
	vms, nics := clients(t, s)
	if _, err := vms.Get(context.Background(), rg, "none", nil); armCode(err) != "ResourceNotFound" {
		t.Fatalf("VM get: %v, want ResourceNotFound", err)
	}
	if _, err := nics.Get(context.Background(), rg, "none", nil); armCode(err) != "ResourceNotFound" {
		t.Fatalf("NIC get: %v, want ResourceNotFound", err)
	}
}

func asResponseError(err error, re **azcore.ResponseError) bool {
	return errors.As(err, re)
}

// ephemeral makes vm's OS disk an ephemeral one of sizeGB on
// Standard_D2s_v3, at placement (nil: ARM's default).
func ephemeral(vm *armcompute.VirtualMachine, sizeGB int32, placement *armcompute.DiffDiskPlacement) {
	vm.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes("Standard_D2s_v3"))
	vm.Properties.StorageProfile.OSDisk = &armcompute.OSDisk{
		CreateOption: ptr(armcompute.DiskCreateOptionTypesFromImage), DiskSizeGB: ptr(sizeGB),
		Caching:          ptr(armcompute.CachingTypesReadOnly),
		DiffDiskSettings: &armcompute.DiffDiskSettings{Option: ptr(armcompute.DiffDiskOptionsLocal), Placement: placement},
	}
}
