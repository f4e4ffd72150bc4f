// In the cluster's node resource group the Functions identity creates and
// deletes node VMs and their NICs. Virtual Machine Contributor covers both
// (Microsoft.Compute/virtualMachines/*, Microsoft.Network/networkInterfaces/*)
// and grants no access to the VMs themselves nor role assignments.
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
