package armemulator

// The ARM emulator refuses what ARM refuses, with ARM's HTTP status, error
// code and message shape, so a launcher bug shows up in tests the way it
// would in Azure. The checks, in the order a request meets them:
//
//	check                                         status code                         where
//	api-version missing                           400 MissingApiVersionParameter     every route
//	api-version not a date (YYYY-MM-DD[-preview]) 400 InvalidApiVersionParameter     every route
//	api-version the type does not serve           400 NoRegisteredProviderFound      every route (supported: the versions
//	                                                                                  armcompute/v8 and armnetwork/v9 send)
//	tags: more than 50                            400 InvalidTagCount (*)            VM and NIC PUT
//	tags: name longer than 512 characters         400 InvalidTagNameLength           VM and NIC PUT
//	tags: value longer than 256 characters        400 InvalidTagValueLength          VM and NIC PUT
//	tags: name with < > % & \ ? /                 400 InvalidTagNameCharacters       VM and NIC PUT
//	subnet ID malformed                           400 LinkedInvalidPropertyId        NIC PUT
//	subnet does not exist (Options.Subnets)       400 InvalidResourceReference       NIC PUT
//	backend pool or NSG ID malformed              400 LinkedInvalidPropertyId        NIC PUT
//	backend pool or NSG does not exist            400 InvalidResourceReference       NIC PUT (Options.Network)
//	location missing                              400 LocationRequired               VM and NIC PUT
//	customData not base64 or > 87380 characters   400 InvalidParameter (customData)  VM PUT
//	Linux VM, password login disabled, no key     400 InvalidParameter (linuxConfiguration)
//	password login enabled and no adminPassword   400 InvalidParameter (adminPassword)
//	SSH key data not an ssh-rsa/ssh-ed25519 key   400 InvalidParameter (linuxConfiguration.ssh.publicKeys.keyData)
//	Regular priority with evictionPolicy          400 InvalidParameter (evictionPolicy) (*)
//	Regular priority with billingProfile          400 InvalidParameter (billingProfile) (*)
//	Spot maxPrice neither -1 nor positive         400 InvalidParameter (billingProfile.maxPrice) (*)
//	size not offered in location/zone (SKU list)  409 SkuNotAvailable
//	image's Hyper-V generation not the size's     400 BadRequest ("cannot boot Hypervisor Generation")
//	image's architecture not the size's           400 BadRequest (*)
//
// (*) the code is ARM's; the message is written in ARM's shape from the
// documented limit, not copied from a captured response. ARM's own
// defaults are kept: Spot without evictionPolicy means Deallocate and
// without maxPrice means -1, so neither is refused.

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// refusal is an ARM error answer; the zero value means "accepted".
type refusal struct {
	status        int
	code, message string
	target        string
}

func (r refusal) ok() bool { return r.code == "" }

func badParameter(target, format string, args ...any) refusal {
	return refusal{status: http.StatusBadRequest, code: "InvalidParameter", message: fmt.Sprintf(format, args...), target: target}
}

// apiVersions are the api-version values the emulator serves per resource
// type: the ones the SDK modules karpfunc pins send.
var apiVersions = map[string][]string{
	"virtualMachines":       {"2026-04-01"}, // armcompute/v8
	"skus":                  {"2021-07-01"}, // armcompute/v8 ResourceSKUsClient
	"usages":                {"2026-04-01"}, // armcompute/v8 UsageClient (usage_client.go)
	"networkInterfaces":     {"2025-05-01"}, // armnetwork/v9
	"loadBalancers":         {"2025-05-01"}, // armnetwork/v9
	"networkSecurityGroups": {"2025-05-01"}, // armnetwork/v9
	"disks":                 {"2026-03-02"}, // armcompute/v8 DisksClient
	"operations":            {operationsAPIVersion},
	// armcompute/v8 CommunityGalleryImageVersionsClient
	"communityGalleryImageVersions": {"2026-03-03"},
	// armcontainerservice/v6 MaintenanceConfigurationsClient
	"maintenanceConfigurations": {"2025-02-01"},
}

// operationsAPIVersion is what the emulator writes into the operation URLs
// it hands out (clients poll them as given).
const operationsAPIVersion = "2024-07-01"

var apiVersionRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview|-beta|-alpha|-privatepreview)?$`)

// checkAPIVersion checks version for resource type typ ("virtualMachines",
// "networkInterfaces", "skus", "operations").
func checkAPIVersion(typ, version, location string) refusal {
	supported := apiVersions[typ]
	if !apiVersionRE.MatchString(version) {
		return refusal{status: http.StatusBadRequest, code: "InvalidApiVersionParameter",
			message: fmt.Sprintf("The api-version '%s' is invalid. The supported versions are '%s'.", version, strings.Join(supported, ","))}
	}
	if slices.Contains(supported, version) {
		return refusal{}
	}
	if location == "" {
		location = "eastus"
	}
	return refusal{status: http.StatusBadRequest, code: "NoRegisteredProviderFound",
		message: fmt.Sprintf("No registered resource provider found for location '%s' and API version '%s' for type '%s'. The supported api-versions are '%s'. The supported locations are '%s'.",
			location, version, typ, strings.Join(supported, ", "), location)}
}

// Tag limits of Azure Resource Manager.
const (
	maxTags           = 50
	maxTagNameLength  = 512
	maxTagValueLength = 256
	maxCustomData     = 87380
)

func checkTags(tags map[string]*string) refusal {
	if len(tags) > maxTags {
		return refusal{status: http.StatusBadRequest, code: "InvalidTagCount",
			message: fmt.Sprintf("The number of tags %d exceeds the maximum of %d tags per resource.", len(tags), maxTags)}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for tagName := range tags {
			if !yield(tagName) {
				return
			}
		}
	}) {
		switch {
		case len(name) > maxTagNameLength:
			return refusal{status: http.StatusBadRequest, code: "InvalidTagNameLength",
				message: fmt.Sprintf("The tag name '%s' exceeds the maximum length of '%d' characters.", name, maxTagNameLength)}
		case strings.ContainsAny(name, `<>%&\?/`):
			return refusal{status: http.StatusBadRequest, code: "InvalidTagNameCharacters",
				message: fmt.Sprintf("The tag names '%s' have reserved characters '<,>,%%,&,\\,?,/' or control characters.", name)}
		case len(deref(tags[name])) > maxTagValueLength:
			return refusal{status: http.StatusBadRequest, code: "InvalidTagValueLength",
				message: fmt.Sprintf("The tag value '%s' exceeds the maximum length of '%d' characters.", deref(tags[name]), maxTagValueLength)}
		}
	}
	return refusal{}
}

// checkOSProfile checks customData and Linux authentication.
func checkOSProfile(p *armcompute.OSProfile) refusal {
	if cd := deref(p.CustomData); cd != "" {
		if _, err := base64.StdEncoding.DecodeString(cd); err != nil || len(cd) > maxCustomData {
			return badParameter("customData", "Custom data in OSProfile must be in Base64 encoding and with a maximum length of %d characters.", maxCustomData)
		}
	}
	linux := p.LinuxConfiguration
	if linux == nil {
		return refusal{}
	}
	var keys []*armcompute.SSHPublicKey
	if linux.SSH != nil {
		keys = linux.SSH.PublicKeys
	}
	if deref(linux.DisablePasswordAuthentication) {
		if len(keys) == 0 {
			return badParameter("linuxConfiguration", "Authentication using either SSH or by user name and password must be enabled in Linux profile.")
		}
	} else if deref(p.AdminPassword) == "" {
		return badParameter("adminPassword", "Required parameter 'adminPassword' is missing (null).")
	}
	for _, key := range keys {
		if key == nil || !validSSHKey(deref(key.KeyData)) {
			return badParameter("linuxConfiguration.ssh.publicKeys.keyData", "The value of parameter linuxConfiguration.ssh.publicKeys.keyData is invalid.")
		}
	}
	return refusal{}
}

// validSSHKey accepts an OpenSSH ssh-rsa or ssh-ed25519 public key, the
// types Azure takes for Linux VMs.
func validSSHKey(key string) bool {
	fields := strings.Fields(key)
	if len(fields) < 2 || (fields[0] != "ssh-rsa" && fields[0] != "ssh-ed25519") {
		return false
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil || len(blob) < 4 {
		return false
	}
	algoLen := binary.BigEndian.Uint32(blob)
	return uint64(algoLen)+4 <= uint64(len(blob)) && string(blob[4:4+algoLen]) == fields[0]
}

// checkEncryptionAtHost refuses encryption at host on a subscription
// without the feature, with ARM's code and message (quoted in
// Azure/ResourceModules#1242 and MicrosoftDocs/azure-docs#68028; the
// feature registration is a prerequisite on
// learn.microsoft.com/azure/virtual-machines/disks-enable-host-based-encryption-portal).
// Whether a size supports it (its EncryptionAtHostSupported capability) is
// not checked: no source gives ARM's answer for an unsupported size.
func (s *Server) checkEncryptionAtHost(p *armcompute.VirtualMachineProperties) refusal {
	if !s.opts.EncryptionAtHostUnregistered || p.SecurityProfile == nil || !deref(p.SecurityProfile.EncryptionAtHost) {
		return refusal{}
	}
	return badParameter("securityProfile.encryptionAtHost", "The property 'securityProfile.encryptionAtHost' is not valid because the "+
		"'Microsoft.Compute/EncryptionAtHost' feature is not enabled for this subscription.")
}

// checkPriority checks the spot fields against the priority.
func checkPriority(p *armcompute.VirtualMachineProperties) refusal {
	spot := deref(p.Priority) == armcompute.VirtualMachinePriorityTypesSpot || deref(p.Priority) == armcompute.VirtualMachinePriorityTypesLow
	if !spot {
		if p.EvictionPolicy != nil {
			return badParameter("evictionPolicy", "Eviction policy can be set only on Azure Spot Virtual Machines; the priority of this virtual machine is '%s'.", orRegular(p.Priority))
		}
		if p.BillingProfile != nil && p.BillingProfile.MaxPrice != nil {
			return badParameter("billingProfile", "Billing profile can be set only on Azure Spot Virtual Machines; the priority of this virtual machine is '%s'.", orRegular(p.Priority))
		}
		return refusal{}
	}
	if p.BillingProfile != nil && p.BillingProfile.MaxPrice != nil {
		if mp := *p.BillingProfile.MaxPrice; mp != -1 && mp <= 0 {
			return badParameter("billingProfile.maxPrice", "The value %g of parameter billingProfile.maxPrice is invalid: use -1 (up to the pay-as-you-go price) or a positive price in US dollars.", mp)
		}
	}
	return refusal{}
}

func orRegular(p *armcompute.VirtualMachinePriorityTypes) string {
	if p == nil {
		return string(armcompute.VirtualMachinePriorityTypesRegular)
	}
	return string(*p)
}

// checkImage checks an AKS node image against the size's Hyper-V
// generations and CPU architecture from the SKU list. Images the emulator
// does not know, and sizes it has no capabilities for, pass.
func (s *Server) checkImageLocked(vm *armcompute.VirtualMachine, size, location string) refusal {
	sp := vm.Properties.StorageProfile
	if sp == nil || sp.ImageReference == nil {
		return refusal{}
	}
	img, ok := nodeimage.Parse(deref(sp.ImageReference.CommunityGalleryImageID))
	if !ok {
		return refusal{}
	}
	if ref := s.checkGalleryVersionLocked(img, deref(sp.ImageReference.CommunityGalleryImageID), location); !ref.ok() {
		return ref
	}
	gens, arch, known := s.skuCapabilitiesLocked(size, location)
	if !known {
		return refusal{}
	}
	if len(gens) > 0 && !slices.Contains(gens, img.Generation) {
		generation := strings.TrimPrefix(img.Generation, "V")
		return refusal{status: http.StatusBadRequest, code: "BadRequest", message: fmt.Sprintf(
			"The selected VM size '%s' cannot boot Hypervisor Generation '%s'. If this was a Create operation please check that the Hypervisor Generation of the Image matches the Hypervisor Generation of the selected VM Size. If this was an Update operation please select a Hypervisor Generation '%s' VM Size. For more information, see https://aka.ms/azuregen2vm",
			size, generation, generation)}
	}
	imageArch := map[string]string{"amd64": "x64", "arm64": "Arm64"}[img.Architecture]
	if arch != "" && !strings.EqualFold(arch, imageArch) {
		return refusal{status: http.StatusBadRequest, code: "BadRequest", message: fmt.Sprintf(
			"The selected VM size '%s' cannot boot an image with CPU architecture '%s'. Please select a VM size that supports CPU architecture '%s'.", size, imageArch, imageArch)}
	}
	return refusal{}
}

// skuCapabilitiesLocked reads a size's HyperVGenerations and
// CpuArchitectureType from the SKU list; known is false without one.
func (s *Server) skuCapabilitiesLocked(size, location string) (gens []string, arch string, known bool) {
	for _, rs := range s.opts.SKUs {
		if rs == nil || !strings.EqualFold(deref(rs.Name), size) || !containsFold(rs.Locations, location) {
			continue
		}
		gens = []string{nodeimage.GenerationV1} // ARM: no capability means Gen1 only
		for _, capability := range rs.Capabilities {
			if capability == nil {
				continue
			}
			switch deref(capability.Name) {
			case "HyperVGenerations":
				gens = strings.Split(deref(capability.Value), ",")
			case "CpuArchitectureType":
				arch = deref(capability.Value)
			}
		}
		return gens, arch, true
	}
	return nil, "", false
}

var subnetIDRE = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+$`)

// checkSubnet checks a NIC IP configuration's subnet reference.
func (s *Server) checkSubnet(subnetID, nicID string, i int) refusal {
	if !subnetIDRE.MatchString(subnetID) {
		return refusal{status: http.StatusBadRequest, code: "LinkedInvalidPropertyId", message: fmt.Sprintf(
			"Property id '%s' at path 'properties.ipConfigurations[%d].properties.subnet.id' is invalid. Expect fully qualified resource Id that start with '/subscriptions/{subscriptionId}' or '/providers/{resourceProviderNamespace}/'.", subnetID, i)}
	}
	if s.opts.Subnets == nil || slices.ContainsFunc(s.opts.Subnets, func(id string) bool { return strings.EqualFold(id, subnetID) }) {
		return refusal{}
	}
	if _, ok := s.network.subnets[strings.ToLower(subnetID)]; ok {
		return refusal{}
	}
	return refusal{status: http.StatusBadRequest, code: "InvalidResourceReference", message: fmt.Sprintf(
		"Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.", subnetID, nicID)}
}

func writeRefusal(w http.ResponseWriter, r refusal) {
	writeJSON(w, r.status, errorResponse{Error: armError{Code: r.code, Message: r.message, Target: r.target}})
}
