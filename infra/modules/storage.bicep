// The Function App's storage: AzureWebJobsStorage (timer leases, host keys)
// and the Flex Consumption deployment container. Shared keys are disabled;
// the Functions identity is the only principal with data access.
param location string
param tags object
param token string
param functionsPrincipalId string

var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var deploymentContainerName = 'app-package'

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: take('stkarpfunc${token}', 24)
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: { name: 'Standard_LRS' }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    defaultToOAuthAuthentication: true
  }
}

resource blobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource deployment 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobs
  name: deploymentContainerName
  properties: { publicAccess: 'None' }
}

resource owner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, functionsPrincipalId, storageBlobDataOwner)
  scope: account
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output accountName string = account.name
output deploymentContainerName string = deployment.name
