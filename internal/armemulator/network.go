package armemulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

type nicState struct {
	nic      armnetwork.Interface
	sub, rg  string
	readyAt  time.Time
	failure  *Fault
	deleting bool
	deleteAt time.Time
	deleteOp *operation
	vmKey    string // attached VM, "" if free
}

// nicKeyFromID turns a NIC resource ID into its resourceKey ("" if the ID is
// not a NIC ID).
func nicKeyFromID(id string) string {
	seg := strings.Split(strings.Trim(id, "/"), "/")
	if len(seg) != 8 || !strings.EqualFold(seg[0], "subscriptions") || !strings.EqualFold(seg[2], "resourceGroups") ||
		!strings.EqualFold(seg[5], "Microsoft.Network") || !strings.EqualFold(seg[6], "networkInterfaces") {
		return ""
	}
	return resourceKey(seg[1], seg[3], seg[7])
}

func subResource(id string) *armnetwork.SubResource { return &armnetwork.SubResource{ID: ptr(id)} }

func deepCopyNIC(n *armnetwork.Interface) *armnetwork.Interface {
	raw, _ := json.Marshal(n)
	var out armnetwork.Interface
	_ = json.Unmarshal(raw, &out)
	return &out
}

func (s *Server) getNIC(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	if _, done := s.inject(w, r, Request{Operation: OpGetNIC, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	nicRecord, ok := s.nics[resourceKey(sub, rg, name)]
	var out *armnetwork.Interface
	if ok {
		out = deepCopyNIC(&nicRecord.nic)
	}
	s.mu.Unlock()
	if !ok {
		notFound(w, "Microsoft.Network/networkInterfaces", name, rg)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listNICs(w http.ResponseWriter, r *http.Request, sub, rg string) {
	if _, done := s.inject(w, r, Request{Operation: OpListNICs, SubscriptionID: sub, ResourceGroup: rg}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	res := armnetwork.InterfaceListResult{Value: []*armnetwork.Interface{}}
	for _, nicRecord := range s.nics {
		if strings.EqualFold(nicRecord.sub, sub) && strings.EqualFold(nicRecord.rg, rg) {
			res.Value = append(res.Value, deepCopyNIC(&nicRecord.nic))
		}
	}
	s.mu.Unlock()
	sort.Slice(res.Value, func(i, j int) bool { return deref(res.Value[i].Name) < deref(res.Value[j].Name) })
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) putNIC(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", "Reading the request body failed: "+err.Error())
		return
	}
	var nic armnetwork.Interface
	if err := json.Unmarshal(body, &nic); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: "+err.Error())
		return
	}
	fault, done := s.inject(w, r, Request{Operation: OpPutNIC, SubscriptionID: sub, ResourceGroup: rg, Name: name})
	if done {
		return
	}
	location := strings.ToLower(deref(nic.Location))

	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	key := resourceKey(sub, rg, name)
	if existing, ok := s.nics[key]; ok {
		s.updateNICTagsLocked(w, existing, name, nic.Tags)
		return
	}
	id := azure.NICResourceID(sub, rg, name)
	if ref := s.checkNewNICLocked(&nic, id, name, location); !ref.ok() {
		writeRefusal(w, ref)
		return
	}
	nicRecord := &nicState{sub: sub, rg: rg, readyAt: s.clock.Now().Add(s.opts.OpDelay), failure: fault}
	nic.ID = ptr(id)
	nic.Name = ptr(name)
	nic.Type = ptr("Microsoft.Network/networkInterfaces")
	nic.Etag = ptr(`W/"` + newUUID() + `"`)
	nic.Properties.ResourceGUID = ptr(newUUID())
	nic.Properties.ProvisioningState = ptr(armnetwork.ProvisioningStateUpdating)
	nicRecord.nic = nic
	s.nics[key] = nicRecord
	s.counters.NICCreates++
	op := s.newOperationLocked("Microsoft.Network", location, nicRecord.readyAt, fault)
	s.acceptLRO(w, sub, op, false)
	writeJSON(w, http.StatusCreated, deepCopyNIC(&nicRecord.nic))
}

// updateNICTagsLocked answers a PUT on an existing NIC: only its tags
// change, unless it is being deleted.
func (s *Server) updateNICTagsLocked(w http.ResponseWriter, existing *nicState, name string, tags map[string]*string) {
	if existing.deleting {
		writeError(w, http.StatusConflict, "AnotherOperationInProgress", fmt.Sprintf("Network interface '%s' is being deleted.", name))
		return
	}
	existing.nic.Tags = tags
	writeJSON(w, http.StatusOK, deepCopyNIC(&existing.nic))
}

// checkNewNICLocked validates a new NIC's body the way ARM does
// synchronously, addressing its IP configurations as it goes.
func (s *Server) checkNewNICLocked(nic *armnetwork.Interface, id, name, location string) refusal {
	if ref := checkTags(nic.Tags); !ref.ok() {
		return ref
	}
	switch {
	case location == "":
		return refusal{status: http.StatusBadRequest, code: "LocationRequired", message: "The location property is required for this definition."}
	case nic.Properties == nil || len(nic.Properties.IPConfigurations) == 0:
		return badParameter("", "Network interface '%s' must have at least one IP configuration.", name)
	}
	for i, ipc := range nic.Properties.IPConfigurations {
		if ref := s.addressIPConfigLocked(ipc, id, name, i); !ref.ok() {
			return ref
		}
	}
	return s.checkNICReferences(nic, id)
}

// addressIPConfigLocked checks IP configuration i's subnet and gives it a
// name, an ID and the next private address.
func (s *Server) addressIPConfigLocked(ipc *armnetwork.InterfaceIPConfiguration, id, name string, i int) refusal {
	if ipc == nil || ipc.Properties == nil || ipc.Properties.Subnet == nil || deref(ipc.Properties.Subnet.ID) == "" {
		return badParameter("", "IP configuration %d of network interface '%s' has no subnet.", i, name)
	}
	if ref := s.checkSubnet(deref(ipc.Properties.Subnet.ID), id, i); !ref.ok() {
		return ref
	}
	if deref(ipc.Name) == "" {
		ipc.Name = ptr(fmt.Sprintf("ipconfig%d", i+1))
	}
	ipc.ID = ptr(id + "/ipConfigurations/" + deref(ipc.Name))
	ipc.Properties.PrivateIPAddress = ptr(fmt.Sprintf("10.224.%d.%d", s.nextIP/256, s.nextIP%256))
	ipc.Properties.PrivateIPAddressVersion = ptr(armnetwork.IPVersionIPv4)
	ipc.Properties.ProvisioningState = ptr(armnetwork.ProvisioningStateSucceeded)
	s.nextIP++
	return refusal{}
}

func (s *Server) deleteNIC(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	fault, done := s.inject(w, r, Request{Operation: OpDeleteNIC, SubscriptionID: sub, ResourceGroup: rg, Name: name})
	if done {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	nicRecord, ok := s.nics[resourceKey(sub, rg, name)]
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if nicRecord.vmKey != "" {
		writeError(w, http.StatusBadRequest, "NicInUse", fmt.Sprintf(
			"Network Interface %s is used by existing resource %s. In order to delete the network interface, it must be dissociated from the resource.",
			deref(nicRecord.nic.ID), deref(nicRecord.nic.Properties.VirtualMachine.ID)))
		return
	}
	if nicRecord.deleting {
		s.acceptLRO(w, sub, nicRecord.deleteOp, true)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	doneAt := s.clock.Now().Add(s.opts.OpDelay)
	op := s.newOperationLocked("Microsoft.Network", strings.ToLower(deref(nicRecord.nic.Location)), doneAt, fault)
	if fault == nil {
		nicRecord.deleting = true
		nicRecord.deleteAt = doneAt
		nicRecord.deleteOp = op
		nicRecord.nic.Properties.ProvisioningState = ptr(armnetwork.ProvisioningStateDeleting)
		s.counters.NICDeletes++
	}
	s.acceptLRO(w, sub, op, true)
	w.WriteHeader(http.StatusAccepted)
}
