package armemulator

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// Identity is a user-assigned managed identity the emulated subscription
// holds, and the caller's right to assign it.
//
// ARM lets a VM carry a user-assigned identity only when the caller may
// perform Microsoft.ManagedIdentity/userAssignedIdentities/assign/action on
// it (Managed Identity Operator, role f1a07417-d97a-45cb-824c-7a7467783830,
// or a role containing it); otherwise it answers 403
// LinkedAuthorizationFailed, naming the identities as "linked scope(s)". An
// identity that does not exist is refused the same way ("or the linked
// scope(s) are invalid"). (Messages as ARM returns them, quoted in
// Azure/aad-pod-identity issues 443, 613 and 339.)
type Identity struct {
	// ResourceID is /subscriptions/…/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>.
	ResourceID string
	// ClientID and PrincipalID are what ARM reports for the identity on a
	// VM that carries it; the node image names the kubelet identity by
	// its client ID.
	ClientID, PrincipalID string
	// CallerMayAssign is whether the caller holds Managed Identity
	// Operator (assign/action) on the identity.
	CallerMayAssign bool
}

// identityLocked is the registered identity id ("" ok=false when unknown).
func (s *Server) identityLocked(id string) (Identity, bool) {
	for _, ident := range s.opts.Identities {
		if strings.EqualFold(ident.ResourceID, id) {
			return ident, true
		}
	}
	return Identity{}, false
}

// checkIdentityLocked refuses a VM carrying user-assigned identities the
// caller may not assign, as ARM does; with no Options.Identities every
// identity is accepted (the emulator knows none).
func (s *Server) checkIdentityLocked(vm *armcompute.VirtualMachine, vmID string) refusal {
	if vm.Identity == nil || s.opts.Identities == nil {
		return refusal{}
	}
	var denied []string
	for id := range vm.Identity.UserAssignedIdentities {
		if ident, ok := s.identityLocked(id); !ok || !ident.CallerMayAssign {
			denied = append(denied, id)
		}
	}
	if len(denied) == 0 {
		return refusal{}
	}
	slices.Sort(denied)
	caller := s.opts.CallerObjectID
	if caller == "" {
		caller = defaultCallerObjectID
	}
	return refusal{status: http.StatusForbidden, code: "LinkedAuthorizationFailed", message: fmt.Sprintf(
		"The client '%s' with object id '%s' has permission to perform action 'Microsoft.Compute/virtualMachines/write' on scope '%s'; "+
			"however, it does not have permission to perform action 'Microsoft.ManagedIdentity/userAssignedIdentities/assign/action' "+
			"on the linked scope(s) '%s' or the linked scope(s) are invalid.", caller, caller, vmID, strings.Join(denied, ","))}
}

// defaultCallerObjectID names the caller in refusals when
// Options.CallerObjectID is not set.
const defaultCallerObjectID = "00000000-0000-0000-0000-000000000000"

// fillIdentityLocked sets the client and principal IDs ARM reports for each
// registered user-assigned identity of vm.
func (s *Server) fillIdentityLocked(vm *armcompute.VirtualMachine) {
	if vm.Identity == nil {
		return
	}
	for id, val := range vm.Identity.UserAssignedIdentities {
		ident, ok := s.identityLocked(id)
		if !ok {
			continue
		}
		if val == nil {
			val = &armcompute.UserAssignedIdentitiesValue{}
			vm.Identity.UserAssignedIdentities[id] = val
		}
		val.ClientID = ptr(ident.ClientID)
		val.PrincipalID = ptr(ident.PrincipalID)
	}
}

// checkKubeletIdentity refuses to start a kubelet whose customData names a
// kubelet identity (USER_ASSIGNED_IDENTITY_ID, azure.json's
// userAssignedIdentityID: a client ID) that vm does not carry: the node's
// IMDS hands out no token for it, so the ACR credential provider and the
// cloud-node-manager fail. A VM whose identities' client IDs the emulator
// does not know (not in Options.Identities) passes when it carries any.
// Stricter than Azure, on purpose: a real node registers and only its ACR
// pulls fail; here the missing identity is made visible at boot. Why the
// identity must be on the VM: karpenter-provider-azure
// pkg/providers/instance/vminstance.go attaches the kubelet identity
// (NODE_IDENTITIES) to every node VM it creates.
func checkKubeletIdentity(vm *armcompute.VirtualMachine, clientID string) error {
	if clientID == "" {
		return nil
	}
	var carried []string
	known := true
	if vm.Identity != nil {
		for id, val := range vm.Identity.UserAssignedIdentities {
			if val == nil || deref(val.ClientID) == "" {
				known = false
				carried = append(carried, id)
				continue
			}
			if strings.EqualFold(deref(val.ClientID), clientID) {
				return nil
			}
			carried = append(carried, id+" (client ID "+deref(val.ClientID)+")")
		}
	}
	if !known {
		return nil
	}
	slices.Sort(carried)
	return fmt.Errorf("customData names kubelet identity %s (USER_ASSIGNED_IDENTITY_ID, azure.json userAssignedIdentityID) but the VM "+
		"carries no user-assigned identity with that client ID (it carries %v): IMDS gives no token for it, so image pulls from ACR fail; "+
		"attach the kubelet identity to node VMs (NODE_IDENTITIES)", clientID, carried)
}
