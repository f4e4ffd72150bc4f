// In the cluster's node resource group the Functions identity creates and
// deletes node VMs and their NICs. Virtual Machine Contributor covers both
// (Microsoft.Compute/virtualMachines/*, Microsoft.Network/networkInterfaces/*)
// and grants no access to the VMs themselves nor role assignments.
//
// It also covers wiring a NIC into the cluster's network where AKS put it,
// in this same resource group (Learn, "Azure built-in roles for Compute",
// Virtual Machine Contributor): listing the load balancers and joining the
// pools of "kubernetes" (Microsoft.Network/loadBalancers/read,
// loadBalancers/backendAddressPools/join/action), and listing and joining
// the cluster NSG aks-agentpool-<id>-nsg (networkSecurityGroups/read,
// networkSecurityGroups/join/action). Azure/karpenter-provider-azure grants
// Network Contributor here for the same; it needs none of the write rights
// that role adds.
param functionsPrincipalId string

var virtualMachineContributor = '9980e02c-c2be-4d73-94e8-173b1dc7cf3c'

resource vmContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(resourceGroup().id, functionsPrincipalId, virtualMachineContributor)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', virtualMachineContributor)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}
