// Node VMs carry the cluster's kubelet identity (NODE_IDENTITIES). ARM lets
// a VM write attach a user-assigned identity only when the caller may
// perform Microsoft.ManagedIdentity/userAssignedIdentities/assign/action on
// it, else it answers LinkedAuthorizationFailed: Managed Identity Operator on
// the kubelet identity itself (not its resource group) gives the Functions
// identity exactly that, and nothing on other identities.
param functionsPrincipalId string

@description('The kubelet identity\'s name (last segment of identityProfile.kubeletidentity.resourceId); deployed into its resource group.')
param kubeletIdentityName string

var managedIdentityOperator = 'f1a07417-d97a-45cb-824c-7a7467783830'

resource kubeletIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' existing = {
  name: kubeletIdentityName
}

resource operator 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(kubeletIdentity.id, functionsPrincipalId, managedIdentityOperator)
  scope: kubeletIdentity
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', managedIdentityOperator)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}
