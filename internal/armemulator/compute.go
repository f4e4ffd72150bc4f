package armemulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

const maxBody = 4 << 20

type vmState struct {
	vm       armcompute.VirtualMachine // as stored, customData included
	sub, rg  string
	location string
	zone     string // Kubernetes form, "" if regional
	readyAt  time.Time
	failure  *Fault // async create failure
	deleting bool
	deleteAt time.Time
	deleteOp *operation
	booted   bool
	nicKeys  []string
	eviction *eviction // a spot eviction under way
}

func (v *vmState) name() string { return deref(v.vm.Name) }

// public is the VM as ARM returns it: customData is write-only in ARM and
// never comes back on GET.
func (v *vmState) public() *armcompute.VirtualMachine {
	out := deepCopyVM(&v.vm)
	if out.Properties != nil && out.Properties.OSProfile != nil {
		out.Properties.OSProfile.CustomData = nil
	}
	return out
}

func deepCopyVM(vm *armcompute.VirtualMachine) *armcompute.VirtualMachine {
	raw, _ := json.Marshal(vm)
	var out armcompute.VirtualMachine
	_ = json.Unmarshal(raw, &out)
	return &out
}

func (s *Server) vmID(sub, rg, name string) string { return azure.VMResourceID(sub, rg, name) }

func notFound(w http.ResponseWriter, typ, name, rg string) {
	writeError(w, http.StatusNotFound, "ResourceNotFound",
		fmt.Sprintf("The Resource '%s/%s' under resource group '%s' was not found.", typ, name, rg))
}

func (s *Server) getVM(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	if _, done := s.inject(w, r, Request{Operation: OpGetVM, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	vmRecord, ok := s.vms[resourceKey(sub, rg, name)]
	var out *armcompute.VirtualMachine
	if ok {
		out = vmRecord.public()
		if strings.EqualFold(r.URL.Query().Get("$expand"), "instanceView") {
			out.Properties.InstanceView = vmRecord.instanceView()
		}
	}
	s.mu.Unlock()
	if !ok {
		notFound(w, "Microsoft.Compute/virtualMachines", name, rg)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listVMs(w http.ResponseWriter, r *http.Request, sub, rg string) {
	if _, done := s.inject(w, r, Request{Operation: OpListVMs, SubscriptionID: sub, ResourceGroup: rg}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	res := armcompute.VirtualMachineListResult{Value: []*armcompute.VirtualMachine{}}
	for _, vmRecord := range s.vms {
		if strings.EqualFold(vmRecord.sub, sub) && strings.EqualFold(vmRecord.rg, rg) {
			res.Value = append(res.Value, vmRecord.public())
		}
	}
	s.mu.Unlock()
	sort.Slice(res.Value, func(i, j int) bool { return deref(res.Value[i].Name) < deref(res.Value[j].Name) })
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) putVM(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", "Reading the request body failed: "+err.Error())
		return
	}
	var vm armcompute.VirtualMachine
	if err := json.Unmarshal(body, &vm); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: "+err.Error())
		return
	}
	location := strings.ToLower(deref(vm.Location))
	sku := ""
	if vm.Properties != nil && vm.Properties.HardwareProfile != nil {
		sku = string(deref(vm.Properties.HardwareProfile.VMSize))
	}
	armZone := ""
	zone := ""
	if len(vm.Zones) > 1 {
		writeError(w, http.StatusBadRequest, "InvalidParameter", "A virtual machine can be placed in at most one availability zone.")
		return
	}
	if len(vm.Zones) == 1 {
		armZone = deref(vm.Zones[0])
		zone = location + "-" + armZone
	}
	fault, done := s.inject(w, r, Request{Operation: OpPutVM, SubscriptionID: sub, ResourceGroup: rg, Name: name, SKU: sku, Zone: zone})
	if done {
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	key := resourceKey(sub, rg, name)
	if existing, ok := s.vms[key]; ok {
		// An update: only tags are mutable here; everything else about a
		// node VM is fixed at creation.
		if existing.deleting {
			writeError(w, http.StatusConflict, "OperationNotAllowed", fmt.Sprintf("The virtual machine '%s' is being deleted.", name))
			return
		}
		existing.vm.Tags = vm.Tags
		writeJSON(w, http.StatusOK, existing.public())
		return
	}

	if ref := s.validateVMLocked(sub, rg, name, &vm, location, sku, armZone); !ref.ok() {
		writeRefusal(w, ref)
		return
	}
	if ref := s.checkQuotaLocked(sub, location, sku, &vm); !ref.ok() {
		s.counters.QuotaRefusals++
		s.log.Info("VM create refused: quota", "name", name, "sku", sku)
		writeRefusal(w, ref)
		return
	}
	diskName := osDiskName(&vm, name)
	if ref := s.checkOSDiskLocked(sub, rg, diskName); !ref.ok() {
		writeRefusal(w, ref)
		return
	}

	now := s.clock.Now()
	id := s.vmID(sub, rg, name)
	vmRecord := &vmState{sub: sub, rg: rg, location: location, zone: zone, readyAt: now.Add(s.opts.VMCreateDelay)}
	vm.ID = ptr(id)
	vm.Name = ptr(name)
	vm.Type = ptr("Microsoft.Compute/virtualMachines")
	vm.Properties.VMID = ptr(newUUID())
	vm.Properties.TimeCreated = ptr(now.UTC())
	vm.Properties.ProvisioningState = ptr("Creating")
	s.fillIdentityLocked(&vm)
	vmRecord.vm = vm
	s.createOSDiskLocked(vmRecord, key, diskName)
	for _, ref := range vm.Properties.NetworkProfile.NetworkInterfaces {
		nk := nicKeyFromID(deref(ref.ID))
		vmRecord.nicKeys = append(vmRecord.nicKeys, nk)
		nicRecord := s.nics[nk]
		nicRecord.vmKey = key
		nicRecord.nic.Properties.VirtualMachine = subResource(id)
	}
	if fault != nil {
		vmRecord.failure = fault
	}
	s.vms[key] = vmRecord
	s.counters.VMCreates++
	op := s.newOperationLocked("Microsoft.Compute", location, vmRecord.readyAt, fault)
	s.acceptLRO(w, sub, op, false)
	s.log.Info("VM creating", "name", name, "sku", sku, "zone", zone)
	writeJSON(w, http.StatusCreated, vmRecord.public())
}

// validateVMLocked checks what ARM would reject synchronously (the list is
// in validate.go). It returns the refusal, or the zero refusal when the VM
// is valid.
func (s *Server) validateVMLocked(sub, rg, name string, vm *armcompute.VirtualMachine, location, sku, zone string) refusal {
	if ref := checkTags(vm.Tags); !ref.ok() {
		return ref
	}
	if ref := checkVMRequired(name, vm, location, sku); !ref.ok() {
		return ref
	}
	if ref := checkOSProfile(vm.Properties.OSProfile); !ref.ok() {
		return ref
	}
	if ref := checkPriority(vm.Properties); !ref.ok() {
		return ref
	}
	if ref := s.checkEncryptionAtHost(vm.Properties); !ref.ok() {
		return ref
	}
	if ref := s.checkVMNICsLocked(sub, rg, name, vm, location); !ref.ok() {
		return ref
	}
	if ref := s.checkIdentityLocked(vm, s.vmID(sub, rg, name)); !ref.ok() {
		return ref
	}
	if msg := s.skuUnavailableLocked(sku, location, zone); msg != "" {
		return refusal{status: http.StatusConflict, code: "SkuNotAvailable", message: msg}
	}
	if ref := s.checkEphemeralOSDiskLocked(vm, sku, location); !ref.ok() {
		return ref
	}
	return s.checkImageLocked(vm, sku, location)
}

// checkVMRequired refuses a VM body missing a property ARM requires.
func checkVMRequired(name string, vm *armcompute.VirtualMachine, location, sku string) refusal {
	bad := func(format string, args ...any) refusal { return badParameter("", format, args...) }
	switch {
	case location == "":
		return refusal{status: http.StatusBadRequest, code: "LocationRequired", message: "The location property is required for this definition."}
	case vm.Properties == nil:
		return bad("The properties of virtual machine '%s' are required.", name)
	case sku == "":
		return bad("Required parameter 'hardwareProfile.vmSize' is missing (null).")
	case vm.Properties.OSProfile == nil || deref(vm.Properties.OSProfile.ComputerName) == "":
		return bad("Required parameter 'osProfile.computerName' is missing (null).")
	case vm.Properties.NetworkProfile == nil || len(vm.Properties.NetworkProfile.NetworkInterfaces) == 0:
		return bad("Virtual machine '%s' must have at least one network interface.", name)
	}
	return refusal{}
}

// checkVMNICsLocked refuses a VM whose network interfaces are missing, not
// yet provisioned, in another location or used by another VM.
func (s *Server) checkVMNICsLocked(sub, rg, name string, vm *armcompute.VirtualMachine, location string) refusal {
	for _, ref := range vm.Properties.NetworkProfile.NetworkInterfaces {
		if refused := s.checkVMNICLocked(sub, rg, name, deref(ref.ID), location); !refused.ok() {
			return refused
		}
	}
	return refusal{}
}

func (s *Server) checkVMNICLocked(sub, rg, name, id, location string) refusal {
	nicRecord, ok := s.nics[nicKeyFromID(id)]
	if !ok || nicRecord.deleting {
		return badParameter("", "Network interface '%s' referenced by virtual machine '%s' was not found.", id, name)
	}
	if code, msg, status := nicNotProvisioned(nicRecord, id, s.vmID(sub, rg, name)); code != "" {
		return refusal{status: status, code: code, message: msg}
	}
	if !strings.EqualFold(deref(nicRecord.nic.Location), location) {
		return badParameter("", "Network interface '%s' is in location '%s', the virtual machine in '%s'.", id, deref(nicRecord.nic.Location), location)
	}
	if nicRecord.vmKey != "" && nicRecord.vmKey != resourceKey(sub, rg, name) {
		return refusal{status: http.StatusBadRequest, code: "NicInUse", message: fmt.Sprintf("Network interface '%s' is used by existing virtual machine '%s'.", id, s.vms[nicRecord.vmKey].name())}
	}
	return refusal{}
}

// skuUnavailableLocked explains why sku cannot be created in location/zone,
// or returns "". Without a SKU list every size is accepted.
func (s *Server) skuUnavailableLocked(sku, location, zone string) string {
	if len(s.opts.SKUs) == 0 {
		return ""
	}
	unavailable := fmt.Sprintf("The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: %s' is currently not available in location '%s'", sku, location)
	if zone != "" {
		unavailable += " zones '" + zone + "'"
	}
	unavailable += ". Please try another size or deploy to a different location or different zone."
	for _, rs := range s.opts.SKUs {
		if rs == nil || !strings.EqualFold(deref(rs.ResourceType), "virtualMachines") || !strings.EqualFold(deref(rs.Name), sku) || !containsFold(rs.Locations, location) {
			continue
		}
		if skuRestricted(rs, location, zone) || skuZoneMissing(rs, location, zone) {
			return unavailable
		}
		return ""
	}
	return unavailable
}

// skuRestricted: one of the SKU's restrictions covers the location, or the
// zone when one is asked for.
func skuRestricted(rs *armcompute.ResourceSKU, location, zone string) bool {
	for _, restriction := range rs.Restrictions {
		if restriction == nil || restriction.RestrictionInfo == nil {
			continue
		}
		switch deref(restriction.Type) {
		case armcompute.ResourceSKURestrictionsTypeLocation:
			if containsFold(restriction.RestrictionInfo.Locations, location) {
				return true
			}
		case armcompute.ResourceSKURestrictionsTypeZone:
			if zone != "" && containsFold(restriction.RestrictionInfo.Zones, zone) {
				return true
			}
		}
	}
	return false
}

// skuZoneMissing: a zone is asked for and the SKU's location info for the
// location does not list it.
func skuZoneMissing(rs *armcompute.ResourceSKU, location, zone string) bool {
	if zone == "" {
		return false
	}
	for _, li := range rs.LocationInfo {
		if li != nil && strings.EqualFold(deref(li.Location), location) && !containsFold(li.Zones, zone) {
			return true
		}
	}
	return false
}

func (s *Server) deleteVM(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	fault, done := s.inject(w, r, Request{Operation: OpDeleteVM, SubscriptionID: sub, ResourceGroup: rg, Name: name})
	if done {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	vmRecord, ok := s.vms[resourceKey(sub, rg, name)]
	if !ok {
		w.WriteHeader(http.StatusNoContent) // ARM: deleting what is not there succeeds
		return
	}
	if vmRecord.deleting {
		s.acceptLRO(w, sub, vmRecord.deleteOp, true)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	now := s.clock.Now()
	doneAt := now.Add(s.opts.VMDeleteDelay)
	op := s.newOperationLocked("Microsoft.Compute", vmRecord.location, doneAt, fault)
	if fault == nil {
		vmRecord.deleting = true
		vmRecord.deleteAt = doneAt
		vmRecord.deleteOp = op
		vmRecord.vm.Properties.ProvisioningState = ptr("Deleting")
		s.counters.VMDeletes++
		s.log.Info("VM deleting", "name", name)
	}
	s.acceptLRO(w, sub, op, true)
	w.WriteHeader(http.StatusAccepted)
}

var skuFilterRE = regexp.MustCompile(`(?i)^\s*location\s+eq\s+'([^']+)'\s*$`)

func (s *Server) listSKUs(w http.ResponseWriter, r *http.Request, sub string) {
	if _, done := s.inject(w, r, Request{Operation: OpListSKUs, SubscriptionID: sub}); done {
		return
	}
	location := ""
	if filter := r.URL.Query().Get("$filter"); filter != "" {
		match := skuFilterRE.FindStringSubmatch(filter)
		if match == nil {
			writeError(w, http.StatusBadRequest, "InvalidFilterInQueryString", "The filter '"+filter+"' is not supported; use location eq '<location>'.")
			return
		}
		location = match[1]
	}
	res := armcompute.ResourceSKUsResult{Value: []*armcompute.ResourceSKU{}}
	for _, rs := range s.opts.SKUs {
		if rs != nil && (location == "" || containsFold(rs.Locations, location)) {
			res.Value = append(res.Value, rs)
		}
	}
	writeJSON(w, http.StatusOK, res)
}

func containsFold(list []*string, s string) bool {
	for _, item := range list {
		if item != nil && strings.EqualFold(*item, s) {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
