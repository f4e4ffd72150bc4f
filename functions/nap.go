package main

import (
	"fmt"
	"strings"
)

// EnvNodeProvisioningMode is the managed cluster's
// properties.nodeProvisioningProfile.mode ("Manual" or "Auto"), which the
// deployment reads from the cluster and sets (az aks show --query
// nodeProvisioningProfile.mode). With node auto provisioning (NAP, mode
// Auto) AKS runs its own Karpenter on the same karpenter.sh objects and the
// same node resource group: NAP and karpfunc are alternatives, and two
// autoscalers would launch and delete each other's nodes. So the handler
// refuses to act unless the mode is Manual.
const EnvNodeProvisioningMode = "KARPFUNC_NODE_PROVISIONING_MODE"

// NAPEnabledError is the refusal to act on a cluster with NAP on.
type NAPEnabledError struct{ error }

func (e *NAPEnabledError) Unwrap() error { return e.error }

// checkNodeProvisioningMode returns nil only for mode Manual.
func checkNodeProvisioningMode(getenv func(string) string) error {
	mode := strings.TrimSpace(getenv(EnvNodeProvisioningMode))
	switch {
	case mode == "":
		return fmt.Errorf("app setting %s is not set: set it to the AKS cluster's node provisioning mode (az aks show -g <resource group> -n <cluster> --query nodeProvisioningProfile.mode; unset there means Manual). karpfunc runs only with Manual: node auto provisioning (Auto) and karpfunc are alternatives", EnvNodeProvisioningMode)
	case strings.EqualFold(mode, "Manual"):
		return nil
	case strings.EqualFold(mode, "Auto"):
		return &NAPEnabledError{fmt.Errorf("node auto provisioning (NAP) is enabled on this cluster (app setting %s=%s, the managed cluster's nodeProvisioningProfile.mode): NAP and karpfunc are alternatives, and both would launch and delete each other's nodes, so karpfunc does nothing. Either turn NAP off (az aks update -g <resource group> -n <cluster> --node-provisioning-mode Manual) and set %s=Manual, or remove karpfunc", EnvNodeProvisioningMode, mode, EnvNodeProvisioningMode)}
	default:
		return fmt.Errorf("app setting %s=%q is not a node provisioning mode: set it to Manual (the AKS cluster's nodeProvisioningProfile.mode; karpfunc does not run alongside Auto)", EnvNodeProvisioningMode, mode)
	}
}
