// The Function App on Flex Consumption running the Go custom handler
// (runtime custom 1.0). Every connection is identity-based through the one
// user-assigned Functions identity; no app setting holds a key.
param location string
param tags object
param token string
param maximumInstanceCount int

// A Flex Consumption instance's memory (2048 or 4096 MB); the handler's Go
// runtime gets it as GOMEMLIMIT less headroom for what Go does not count
// (binary, stacks of the host's process), and the warm snapshot's budget
// is half of that (pkg/snapshot MemoryBudget).
var instanceMemoryMB = 2048
var goMemoryLimitMB = instanceMemoryMB - 256
param otlpEndpoint string
param decisionEventsEndpoint string
param identityId string
param identityClientId string
param storageAccountName string
param deploymentContainerName string
param applicationInsightsName string
param serviceBusFqdn string
@description('Queue names by role: provision, lifecycle, interruption, disruption.')
param queues object
param clusterName string
// The AKS cluster's resource ID: drift waits for its maintenance windows.
param clusterResourceId string
param clusterLocation string
param nodeResourceGroupName string
param nodeSubnetId string
param nodeSshPublicKey string
param karpfuncNamespace string
@description('The cluster\'s API server URL.')
param apiServerUrl string
@description('The cluster\'s CA certificate, base64-encoded PEM.')
param apiServerCa string
param nodeProvisioningMode string
@description('Node bootstrap settings by app setting name (pkg/azure bootstrap): NETWORK_*, DNS_SERVICE_IP, VNET_GUID, KUBELET_IDENTITY_CLIENT_ID, NODE_IDENTITIES.')
param nodeNetwork object

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: 'plan-karpfunc-${token}'
  location: location
  tags: tags
  kind: 'functionapp'
  sku: { name: 'FC1', tier: 'FlexConsumption' }
  properties: { reserved: true }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: 'func-karpfunc-${token}'
  location: location
  // azd finds the service's target by this tag (azure.yaml services.functions).
  tags: union(tags, { 'azd-service-name': 'functions' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${identityId}': {} }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${account.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: { name: 'custom', version: '1.0' }
    }
    siteConfig: {
      minTlsVersion: '1.2'
    }
  }
}

// The app settings, grouped by who reads them. infra/infra_test.go checks
// that every setting here is read by the handler, the Functions host or the
// Azure SDK, and that every setting the handler reads is here.
resource settings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: site
  name: 'appsettings'
  properties: {
    // Functions host: storage and telemetry as the Functions identity.
    // The Go runtime: the soft memory limit the snapshot budget derives from.
    GOMEMLIMIT: '${goMemoryLimitMB}MiB'
    AzureWebJobsStorage__accountName: account.name
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    APPLICATIONINSIGHTS_CONNECTION_STRING: appInsights.properties.ConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    // Service Bus triggers (function.json "connection": "ServiceBusConnection")
    // and the handler's own publisher (pkg/bus FromEnv).
    ServiceBusConnection__fullyQualifiedNamespace: serviceBusFqdn
    ServiceBusConnection__credential: 'managedidentity'
    ServiceBusConnection__clientId: identityClientId
    // Queue names the function.json bindings resolve (%PROVISION_QUEUE%...).
    PROVISION_QUEUE: queues.provision
    LIFECYCLE_QUEUE: queues.lifecycle
    INTERRUPTION_QUEUE: queues.interruption
    DISRUPTION_QUEUE: queues.disruption
    // The Sweep timer (NCRONTAB, seconds first): garbage collection and
    // the safety net under disruption's events; slow, so an idle app
    // scales to zero between runs.
    SWEEP_SCHEDULE: '0 */5 * * * *'
    // Consolidation may replace spot nodes with cheaper spot nodes
    // (Karpenter's SpotToSpotConsolidation gate, off by default).
    KARPFUNC_SPOT_TO_SPOT_CONSOLIDATION: 'false'
    // Rebalancing consolidation (beyond Karpenter: several replacements
    // per command), off by default.
    KARPFUNC_REBALANCE_CONSOLIDATION: 'false'
    // Provisioning reads the subscription's compute quota (the usages
    // API) and plans no launch it would refuse; 'false' leaves quota to
    // launch errors alone.
    KARPFUNC_QUOTA_AWARE: 'true'
    // Static NodePools (spec.replicas) keep their replica count; 'false'
    // refuses them by name (docs/static-capacity.md).
    KARPFUNC_STATIC_CAPACITY: 'true'
    // NodeOverlays change prices and capacities; 'false' refuses them by
    // name (docs/node-overlay.md).
    KARPFUNC_NODE_OVERLAY: 'true'
    // CapacityBuffers keep room ahead of demand; 'false' refuses them by
    // name (docs/capacity-buffers.md).
    KARPFUNC_CAPACITY_BUFFERS: 'true'
    // Nodes that stay unhealthy are replaced; 'false' turns node repair
    // off (docs/node-repair.md).
    KARPFUNC_NODE_REPAIR: 'true'
    // Ask the API server for gzip (client-go's default): measured
    // cheaper than uncompressed for the cold pass's LISTs (docs/performance.md);
    // 'false' to measure a cluster where it may differ.
    KARPFUNC_API_COMPRESSION: 'true'
    // A diagnostic, off: 'true' makes every pass prove it wrote no object
    // its snapshot shares with the warm cache, at the cost of copying the
    // cluster each pass (README, "At scale"; the end-to-end tests run with it).
    KARPFUNC_SNAPSHOT_CHECK_SHARED: 'false'
    // azidentity's DefaultAzureCredential: which user-assigned identity.
    AZURE_CLIENT_ID: identityClientId
    // The cluster and where its nodes go (pkg/azure OptionsFromEnv).
    AZURE_SUBSCRIPTION_ID: subscription().subscriptionId
    AZURE_NODE_RESOURCE_GROUP: nodeResourceGroupName
    AZURE_LOCATION: clusterLocation
    AZURE_SUBNET_ID: nodeSubnetId
    AZURE_SSH_PUBLIC_KEY: nodeSshPublicKey
    // The AKS node image version nodes boot; empty follows each image
    // definition's latest version in AKS's community galleries (pkg/nodeimage
    // Resolver), re-read every KARPFUNC_NODE_IMAGE_TTL (empty: 72h, the Azure
    // provider's); a newer image drifts existing nodes (ImageDrift).
    KARPFUNC_NODE_IMAGE_VERSION: ''
    KARPFUNC_NODE_IMAGE_TTL: ''
    KARPFUNC_CLUSTER_NAME: clusterName
    // Drift replacements start only inside the cluster's planned
    // maintenance windows (docs/maintenance-windows.md).
    KARPFUNC_CLUSTER_RESOURCE_ID: clusterResourceId
    // The cluster's API server, reached as the Functions identity
    // (pkg/kubeauth), and its node provisioning mode (the handler refuses
    // to act with NAP on).
    KARPFUNC_API_SERVER_URL: apiServerUrl
    KARPFUNC_API_SERVER_CA: apiServerCa
    KARPFUNC_NODE_PROVISIONING_MODE: nodeProvisioningMode
    // How nodes join (pkg/azure bootstrap): the API server nodes use, and
    // the cluster's network and kubelet identity. Empty means the handler's
    // default; KUBERNETES_VERSION empty follows the API server's version.
    CLUSTER_ENDPOINT: apiServerUrl
    KUBERNETES_VERSION: ''
    AZURE_TENANT_ID: tenant().tenantId
    NETWORK_PLUGIN: nodeNetwork.NETWORK_PLUGIN
    NETWORK_PLUGIN_MODE: nodeNetwork.NETWORK_PLUGIN_MODE
    NETWORK_POLICY: nodeNetwork.NETWORK_POLICY
    NETWORK_DATAPLANE: nodeNetwork.NETWORK_DATAPLANE
    DNS_SERVICE_IP: nodeNetwork.DNS_SERVICE_IP
    VNET_GUID: nodeNetwork.VNET_GUID
    KUBELET_IDENTITY_CLIENT_ID: nodeNetwork.KUBELET_IDENTITY_CLIENT_ID
    NODE_IDENTITIES: nodeNetwork.NODE_IDENTITIES
    // The handler's tuning (functions/config.go), at their defaults.
    KARPFUNC_NAMESPACE: karpfuncNamespace
    KARPFUNC_LOG_LEVEL: 'INFO'
    KARPFUNC_REGISTRATION_TTL: '15m'
    KARPFUNC_GC_GRACE_PERIOD: '2m'
    // Spot notice assumed when a PreemptionScheduled message has no readable deadline.
    KARPFUNC_SPOT_NOTICE: '30s'
    // First wait before looking at a VM create (then 10s, then every 20s).
    KARPFUNC_LAUNCH_CHECK_INTERVAL: '5s'
    // Decisions as CloudEvents to an Event Grid topic (pkg/decisions); empty: logged only.
    KARPFUNC_DECISION_EVENTS_ENDPOINT: decisionEventsEndpoint
    // OpenTelemetry (pkg/telemetry): OTLP/HTTP to a collector; empty: no export.
    // The per-signal endpoints and protocols override the common ones.
    OTEL_SERVICE_NAME: 'karpfunc-functions'
    OTEL_EXPORTER_OTLP_ENDPOINT: otlpEndpoint
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ''
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: ''
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf'
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ''
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: ''
    OTEL_SDK_DISABLED: 'false'
  }
}

output name string = site.name
