package armemulator

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// instanceView is what GET ...?$expand=instanceView adds to a VM: the
// provisioning status, which for a failed create carries ARM's error as
// ProvisioningState/failed/<code> with its message.
func (v *vmState) instanceView() *armcompute.VirtualMachineInstanceView {
	state := deref(v.vm.Properties.ProvisioningState)
	st := &armcompute.InstanceViewStatus{
		Code:          ptr("ProvisioningState/" + strings.ToLower(state)),
		Level:         ptr(armcompute.StatusLevelTypesInfo),
		DisplayStatus: ptr(state),
	}
	switch state {
	case "Succeeded":
		st.DisplayStatus = ptr("Provisioning succeeded")
	case "Failed":
		st.Level = ptr(armcompute.StatusLevelTypesError)
		st.DisplayStatus = ptr("Provisioning failed")
		if v.failure != nil {
			st.Code = ptr("ProvisioningState/failed/" + v.failure.Code)
			st.Message = ptr(v.failure.message())
		}
	}
	return &armcompute.VirtualMachineInstanceView{
		ComputerName: v.vm.Properties.OSProfile.ComputerName,
		Statuses:     []*armcompute.InstanceViewStatus{st},
	}
}

// nicNotProvisioned is ARM's refusal of a VM that references a NIC still
// being created (or left Failed): a retryable 429 whose detail is
// ReferencedResourceNotProvisioned. "" when the NIC is Succeeded.
func nicNotProvisioned(n *nicState, nicID, vmID string) (string, string, int) {
	state := armnetwork.ProvisioningStateSucceeded
	if n.nic.Properties != nil && n.nic.Properties.ProvisioningState != nil {
		state = *n.nic.Properties.ProvisioningState
	}
	if state == armnetwork.ProvisioningStateSucceeded {
		return "", "", 0
	}
	return "RetryableError", fmt.Sprintf("A retryable error occurred. (ReferencedResourceNotProvisioned: Cannot proceed with operation because resource %s used by resource %s is not in Succeeded state. Resource is in %s state and the last operation that updated/is updating the resource is PutNicOperation.)",
		nicID, vmID, state), http.StatusTooManyRequests
}
