// Log Analytics and workspace-based Application Insights with local
// (instrumentation key) authentication disabled: the Functions host and the
// handler (pkg/telemetry's Application Insights exporter) send telemetry as
// the Functions identity, the relay as its workload identity; each holds
// Monitoring Metrics Publisher here (Learn: "Microsoft Entra authentication
// for Application Insights").
param location string
param tags object
param token string
param functionsPrincipalId string
param relayPrincipalId string
param serviceBusNamespaceId string

var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: 'log-karpfunc-${token}'
  location: location
  tags: tags
  properties: {
    sku: { name: 'PerGB2018' }
    retentionInDays: 30
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: 'appi-karpfunc-${token}'
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

// Who sends telemetry: the Functions (host and handler) and the relay.
resource publisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principalId in [functionsPrincipalId, relayPrincipalId]: {
  name: guid(appInsights.id, principalId, monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

// The karpfunc workbook (infra/workbook.json, tested by infra/workbook_test.go
// against the metrics and decision fields the code emits): pending pods and
// time to capacity, launches and failures by ARM code, fleet cost,
// interruptions, consolidation savings, dead letters, function failures and
// durations. Metrics reach customMetrics straight from the handler and the
// relay (pkg/telemetry, APPLICATIONINSIGHTS_CONNECTION_STRING, Entra ID).
resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, 'karpfunc-workbook', token)
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'karpfunc'
    category: 'workbook'
    sourceId: appInsights.id
    serializedData: replace(replace(loadTextContent('../workbook.json'), '\${applicationInsightsId}', appInsights.id), '\${serviceBusNamespaceId}', serviceBusNamespaceId)
  }
}

output applicationInsightsName string = appInsights.name
output connectionString string = appInsights.properties.ConnectionString
