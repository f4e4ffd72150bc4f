// karpfunc's container registry: the postdeploy hook pushes the relay image
// here as the person running azd (AcrPush), and the cluster's kubelet
// identity pulls it (AcrPull). Entra ID only: no admin user, no anonymous pull.
param location string
param tags object
param token string
@description('Object ID of the cluster\'s kubelet identity (identityProfile.kubeletidentity.objectId).')
param kubeletPrincipalId string
@description('Object ID of the person (or CI principal) running azd; azd sets AZURE_PRINCIPAL_ID.')
param deployerPrincipalId string

var acrPull = '7f951dda-4ed3-4680-a7ca-43fe172d538d'
var acrPush = '8311e382-0749-4cb8-b61a-304f252e45ec'

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' = {
  name: take('crkarpfunc${token}', 50)
  location: location
  tags: tags
  sku: { name: 'Basic' }
  properties: {
    adminUserEnabled: false
    anonymousPullEnabled: false
  }
}

resource pull 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(registry.id, kubeletPrincipalId, acrPull)
  scope: registry
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', acrPull)
    principalId: kubeletPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource push 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(deployerPrincipalId)) {
  name: guid(registry.id, deployerPrincipalId, acrPush)
  scope: registry
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', acrPush)
    principalId: deployerPrincipalId
  }
}

output loginServer string = registry.properties.loginServer
