// Node NICs join the cluster's node subnet, which may live in another
// resource group (bring-your-own VNet): Network Contributor on that subnet
// only. It is a built-in role (it includes subnets/read and
// subnets/join/action), so the deployer needs no right to create custom
// roles; Azure/karpenter-provider-azure's setup grants the same role, on the
// whole VNet resource group (Makefile-az.mk).
param subnetId string
param functionsPrincipalId string

var networkContributor = '4d97b98b-1d4f-4787-a291-c67834d212e7'

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' existing = {
  name: split(subnetId, '/')[8]
}

resource subnet 'Microsoft.Network/virtualNetworks/subnets@2024-05-01' existing = {
  parent: vnet
  name: last(split(subnetId, '/'))
}

resource join 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(subnet.id, functionsPrincipalId, networkContributor)
  scope: subnet
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', networkContributor)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}
