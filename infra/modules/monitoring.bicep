// Log Analytics and workspace-based Application Insights with local
// (instrumentation key) authentication disabled: the Functions host sends
// telemetry as the Functions identity (Monitoring Metrics Publisher).
param location string
param tags object
param token string
param functionsPrincipalId string
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

resource publisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, functionsPrincipalId, monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The karpfunc workbook (infra/workbook.json, tested by infra/workbook_test.go
// against the metrics and decision fields the code emits): pending pods and
// time to capacity, launches and failures by ARM code, fleet cost,
// interruptions, consolidation savings, dead letters, function failures and
// durations. Metrics reach customMetrics through an OpenTelemetry Collector
// the OTLP settings point at (see infra/README.md).
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
