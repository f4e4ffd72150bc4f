// karpfunc on an existing AKS cluster: `azd up` provisions this template.
//
// Subscription scope, because karpfunc's own resources live in a new resource
// group while its role assignments land where the cluster's resources are:
// the node resource group (VMs, NICs), the node subnet (join) and the cluster
// itself (user credential). The preprovision hook (infra/hooks/azdcheck)
// checks the cluster and fills the AZURE_AKS_* values this template reads.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name; names the resource group and seeds unique resource names.')
param environmentName string

@minLength(1)
@description('Region for karpfunc\'s own resources (Function App, Service Bus, storage, monitoring); one where Flex Consumption runs.')
@metadata({ azd: { type: 'location' } })
param location string

@minLength(1)
@description('Name of the existing AKS cluster karpfunc scales.')
param aksClusterName string

@minLength(1)
@description('Resource group of the existing AKS cluster.')
param aksResourceGroupName string

@minLength(1)
@description('The cluster\'s node resource group (MC_...), where karpfunc creates VMs and NICs. Set by the preprovision hook.')
param aksNodeResourceGroupName string

@minLength(1)
@description('Region of the AKS cluster; node VMs are created there. Set by the preprovision hook.')
param aksLocation string

@minLength(1)
@description('Resource ID of the subnet node NICs join. Set by the preprovision hook.')
param aksNodeSubnetId string

@minLength(1)
@description('The cluster\'s OIDC issuer URL, for the relay\'s workload identity federation. Set by the preprovision hook.')
param aksOidcIssuerUrl string

@minLength(1)
@description('The cluster\'s API server URL (https://<fqdn>:443), which the Functions reach as their identity. Set by the preprovision hook.')
param aksApiServerUrl string

@minLength(1)
@description('The cluster\'s CA certificate, base64-encoded PEM (the kubeconfig\'s certificate-authority-data). Set by the preprovision hook.')
param aksApiServerCa string

@allowed(['Manual'])
@description('The cluster\'s nodeProvisioningProfile.mode; karpfunc runs only with Manual (NAP off). Set by the preprovision hook.')
param aksNodeProvisioningMode string

@description('The cluster\'s networkProfile.networkPlugin (azure, kubenet, none), for node bootstrap; empty means the handler\'s default. Set by the preprovision hook.')
param aksNetworkPlugin string

@description('The cluster\'s networkProfile.networkPluginMode (overlay or empty), for node bootstrap; empty means the handler\'s default. Set by the preprovision hook.')
param aksNetworkPluginMode string

@description('The cluster\'s networkProfile.networkPolicy (empty for none), for node bootstrap; empty means the handler\'s default. Set by the preprovision hook.')
param aksNetworkPolicy string

@description('The cluster\'s networkProfile.networkDataplane (azure, cilium), for node bootstrap; empty means the handler\'s default. Set by the preprovision hook.')
param aksNetworkDataplane string

@description('The cluster\'s networkProfile.dnsServiceIP, for node bootstrap; empty means the handler\'s default. Set by the preprovision hook.')
param aksDnsServiceIp string

@description('The cluster\'s resourceGuid of the node subnet\'s VNet, for node bootstrap; empty means the handler\'s default. Set by the preprovision hook.')
param aksVnetGuid string

@description('The cluster\'s identityProfile.kubeletidentity.clientId, for node bootstrap; empty means the handler\'s default. Set by the preprovision hook.')
param aksKubeletIdentityClientId string

@description('The cluster\'s identityProfile.kubeletidentity.resourceId: node VMs carry it (NODE_IDENTITIES) and the Functions identity gets Managed Identity Operator on it. Set by the preprovision hook.')
param aksKubeletIdentityResourceId string

@minLength(1)
@description('Object ID of the cluster\'s kubelet identity (identityProfile.kubeletidentity.objectId); it gets AcrPull on karpfunc\'s registry to pull the relay image. Set by the preprovision hook.')
param aksKubeletIdentityObjectId string

@description('Object ID of the principal running azd (azd sets AZURE_PRINCIPAL_ID); it gets AcrPush on karpfunc\'s registry, where the postdeploy hook pushes the relay image. Empty: no push right is granted.')
param deployerPrincipalId string = ''

@description('Resource ID of the subscription\'s Microsoft.ResourceNotifications.HealthResources system topic when one exists (a subscription holds one): karpfunc then adds its identity and event subscription to it instead of creating one. Set by the preprovision hook; empty: karpfunc creates the topic in its resource group.')
param healthResourcesTopicId string = ''

@minLength(1)
@description('SSH public key installed on node VMs (Azure requires one for Linux VMs). The preprovision hook generates one when unset.')
param nodeSshPublicKey string

@minLength(1)
@maxLength(63)
@description('Kubernetes namespace of the relay (and of karpfunc\'s state objects).')
param karpfuncNamespace string = 'karpfunc-system'

@minLength(1)
@maxLength(253)
@description('ServiceAccount the relay runs as; the federated credential\'s subject.')
param relayServiceAccountName string = 'karpfunc-relay'

@description('OTLP/HTTP endpoint (an OpenTelemetry Collector) the Functions also export metrics and traces to; empty: no OTLP export. Metrics, decision records and function logs reach Application Insights either way.')
param otlpEndpoint string = ''

@description('Endpoint of an Event Grid topic (CloudEvents v1.0 input schema) karpfunc publishes its decisions to; empty: decisions are only logged. Grant the Functions identity "EventGrid Data Sender" on the topic.')
param decisionEventsEndpoint string = ''

@description('Upper bound on Function App instances (Flex Consumption allows 40 to 1000).')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

var tags = { 'azd-env-name': environmentName, 'app.kubernetes.io/part-of': 'karpfunc' }
var token = toLower(uniqueString(subscription().id, environmentName, location))

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module identities 'modules/identities.bicep' = {
  name: 'karpfunc-identities'
  scope: rg
  params: {
    location: location
    tags: tags
    token: token
    oidcIssuerUrl: aksOidcIssuerUrl
    relaySubject: 'system:serviceaccount:${karpfuncNamespace}:${relayServiceAccountName}'
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'karpfunc-monitoring'
  scope: rg
  params: {
    location: location
    tags: tags
    token: token
    functionsPrincipalId: identities.outputs.functionsPrincipalId
    relayPrincipalId: identities.outputs.relayPrincipalId
    serviceBusNamespaceId: serviceBus.outputs.namespaceId
  }
}

// The relay image's registry (postdeploy pushes, the kubelet pulls).
module registry 'modules/registry.bicep' = {
  name: 'karpfunc-registry'
  scope: rg
  params: {
    location: location
    tags: tags
    token: token
    kubeletPrincipalId: aksKubeletIdentityObjectId
    deployerPrincipalId: deployerPrincipalId
  }
}

module storage 'modules/storage.bicep' = {
  name: 'karpfunc-storage'
  scope: rg
  params: {
    location: location
    tags: tags
    token: token
    functionsPrincipalId: identities.outputs.functionsPrincipalId
  }
}

module serviceBus 'modules/servicebus.bicep' = {
  name: 'karpfunc-servicebus'
  scope: rg
  params: {
    location: location
    tags: tags
    token: token
    functionsPrincipalId: identities.outputs.functionsPrincipalId
    relayPrincipalId: identities.outputs.relayPrincipalId
    eventGridPrincipalId: identities.outputs.eventGridPrincipalId
  }
}

// The HealthResources system topic: the subscription's existing one when
// the preprovision hook found it (one per subscription; a second create
// fails), else a new one in karpfunc's resource group.
var reuseHealthTopic = !empty(healthResourcesTopicId)
var healthTopicGroup = reuseHealthTopic ? split(healthResourcesTopicId, '/')[4] : rg.name
var healthTopicName = reuseHealthTopic ? last(split(healthResourcesTopicId, '/')) : 'evgt-karpfunc-health-${token}'

// What the existing topic already has (its identities, its tags), kept
// when karpfunc adds its own identity to it.
module healthTopicNow 'modules/systemtopic-current.bicep' = if (reuseHealthTopic) {
  name: 'karpfunc-health-topic-current'
  scope: resourceGroup(healthTopicGroup)
  params: {
    topicName: healthTopicName
  }
}

module events 'modules/eventgrid.bicep' = {
  name: 'karpfunc-eventgrid'
  scope: resourceGroup(healthTopicGroup)
  dependsOn: [rg]
  params: {
    topicName: healthTopicName
    topicTags: reuseHealthTopic ? healthTopicNow.outputs.tags : tags
    keptIdentityIds: reuseHealthTopic ? healthTopicNow.outputs.userAssignedIdentityIds : []
    keepSystemAssigned: reuseHealthTopic ? healthTopicNow.outputs.systemAssigned : false
    token: token
    eventGridIdentityId: identities.outputs.eventGridIdentityId
    interruptionQueueId: serviceBus.outputs.interruptionQueueId
    nodeResourceGroupId: '${subscription().id}/resourceGroups/${aksNodeResourceGroupName}'
  }
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'karpfunc-functionapp'
  scope: rg
  params: {
    location: location
    tags: tags
    token: token
    maximumInstanceCount: maximumInstanceCount
    otlpEndpoint: otlpEndpoint
    decisionEventsEndpoint: decisionEventsEndpoint
    identityId: identities.outputs.functionsIdentityId
    identityClientId: identities.outputs.functionsClientId
    storageAccountName: storage.outputs.accountName
    deploymentContainerName: storage.outputs.deploymentContainerName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    serviceBusFqdn: serviceBus.outputs.fullyQualifiedNamespace
    queues: serviceBus.outputs.queueNames
    clusterName: aksClusterName
    clusterResourceId: '${subscription().id}/resourceGroups/${aksResourceGroupName}/providers/Microsoft.ContainerService/managedClusters/${aksClusterName}'
    clusterLocation: aksLocation
    nodeResourceGroupName: aksNodeResourceGroupName
    nodeSubnetId: aksNodeSubnetId
    nodeSshPublicKey: nodeSshPublicKey
    karpfuncNamespace: karpfuncNamespace
    apiServerUrl: aksApiServerUrl
    apiServerCa: aksApiServerCa
    nodeProvisioningMode: aksNodeProvisioningMode
    nodeNetwork: {
      NETWORK_PLUGIN: aksNetworkPlugin
      NETWORK_PLUGIN_MODE: aksNetworkPluginMode
      NETWORK_POLICY: aksNetworkPolicy
      NETWORK_DATAPLANE: aksNetworkDataplane
      DNS_SERVICE_IP: aksDnsServiceIp
      VNET_GUID: aksVnetGuid
      KUBELET_IDENTITY_CLIENT_ID: aksKubeletIdentityClientId
      NODE_IDENTITIES: aksKubeletIdentityResourceId
    }
  }
}

// What the Functions identity may do where the cluster's resources are.
module nodeAccess 'modules/node-access.bicep' = {
  name: 'karpfunc-node-access'
  scope: resourceGroup(aksNodeResourceGroupName)
  params: {
    functionsPrincipalId: identities.outputs.functionsPrincipalId
  }
}

// The subscription's compute quota (the usages API) is read at the
// subscription, not in a resource group.
module quotaAccess 'modules/quota-access.bicep' = {
  name: 'karpfunc-quota-access'
  params: {
    functionsPrincipalId: identities.outputs.functionsPrincipalId
  }
}

module kubeletIdentityAccess 'modules/kubelet-identity-access.bicep' = if (!empty(aksKubeletIdentityResourceId)) {
  name: 'karpfunc-kubelet-identity-access'
  scope: resourceGroup(split(aksKubeletIdentityResourceId, '/')[2], split(aksKubeletIdentityResourceId, '/')[4])
  params: {
    functionsPrincipalId: identities.outputs.functionsPrincipalId
    kubeletIdentityName: last(split(aksKubeletIdentityResourceId, '/'))
  }
}

module subnetAccess 'modules/subnet-access.bicep' = {
  name: 'karpfunc-subnet-access'
  scope: resourceGroup(split(aksNodeSubnetId, '/')[2], split(aksNodeSubnetId, '/')[4])
  params: {
    subnetId: aksNodeSubnetId
    functionsPrincipalId: identities.outputs.functionsPrincipalId
  }
}

// ==== Deployer rights: built-in roles only ====
// This template defines no custom role (no Microsoft.Authorization/
// roleDefinitions), so Contributor plus Role Based Access Control
// Administrator on the subscription can deploy it. Every role it assigns is
// built in; the list (role, who, where) is infra/README.md's "Who may do
// what" table and infra_test.go's builtInRoles. Add a role there and in the
// module that assigns it.
// ==== end deployer rights ====

module clusterAccess 'modules/cluster-access.bicep' = {
  name: 'karpfunc-cluster-access'
  scope: resourceGroup(aksResourceGroupName)
  params: {
    clusterName: aksClusterName
    functionsPrincipalId: identities.outputs.functionsPrincipalId
  }
}

// Read by azd (AZURE_*, SERVICE_*) and by infra/hooks (helm install values).
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output SERVICE_FUNCTIONS_NAME string = functionApp.outputs.name
output AZURE_SERVICEBUS_NAMESPACE string = serviceBus.outputs.fullyQualifiedNamespace
output KARPFUNC_RELAY_CLIENT_ID string = identities.outputs.relayClientId
output KARPFUNC_FUNCTIONS_PRINCIPAL_ID string = identities.outputs.functionsPrincipalId
output KARPFUNC_NAMESPACE string = karpfuncNamespace
output KARPFUNC_RELAY_SERVICE_ACCOUNT string = relayServiceAccountName
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.applicationInsightsName
// Not a secret (Learn: "Connection strings in Application Insights": the
// ikey is not a security token); local auth is off, so only identities with
// Monitoring Metrics Publisher can send with it. postdeploy gives it to the relay.
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.connectionString
output AZURE_CONTAINER_REGISTRY_ENDPOINT string = registry.outputs.loginServer
