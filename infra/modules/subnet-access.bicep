// Node NICs join the cluster's node subnet, which may live in another
// resource group (bring-your-own VNet): grant join on that subnet only.
param subnetId string
param functionsPrincipalId string
@description('The karpfunc subnet-join custom role (subnets/read, subnets/join/action).')
param roleDefinitionId string

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' existing = {
  name: split(subnetId, '/')[8]
}

resource subnet 'Microsoft.Network/virtualNetworks/subnets@2024-05-01' existing = {
  parent: vnet
  name: last(split(subnetId, '/'))
}

resource join 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(subnet.id, functionsPrincipalId, roleDefinitionId)
  scope: subnet
  properties: {
    roleDefinitionId: roleDefinitionId
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}
