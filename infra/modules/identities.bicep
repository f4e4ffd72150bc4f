// The three user-assigned identities, one per job:
//   functions  — the Function App: Service Bus, storage, ARM (VMs/NICs), AKS;
//   relay      — the in-cluster relay (workload identity): send only;
//   eventgrid  — the Event Grid system topic: send to the interruption queue.
param location string
param tags object
param token string
@description('OIDC issuer of the AKS cluster.')
param oidcIssuerUrl string
@description('Federated credential subject: system:serviceaccount:<namespace>:<name>.')
param relaySubject string

resource functions 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-karpfunc-functions-${token}'
  location: location
  tags: tags
}

resource relay 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-karpfunc-relay-${token}'
  location: location
  tags: tags
}

resource relayFederation 'Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials@2023-01-31' = {
  parent: relay
  name: 'karpfunc-relay'
  properties: {
    issuer: oidcIssuerUrl
    subject: relaySubject
    audiences: ['api://AzureADTokenExchange']
  }
}

resource eventGrid 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-karpfunc-eventgrid-${token}'
  location: location
  tags: tags
}

output functionsIdentityId string = functions.id
output functionsClientId string = functions.properties.clientId
output functionsPrincipalId string = functions.properties.principalId
output relayClientId string = relay.properties.clientId
output relayPrincipalId string = relay.properties.principalId
output eventGridIdentityId string = eventGrid.id
output eventGridPrincipalId string = eventGrid.properties.principalId
