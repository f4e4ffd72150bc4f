// The Functions identity reaches the cluster's API server as itself: it may
// fetch the cluster user kubeconfig (API server address and CA), and the
// Kubernetes RBAC installed by the chart says what it may do inside. It
// reads the cluster's planned maintenance configurations (drift waits for
// their windows, pkg/maintenance): Reader on the cluster, whose */read
// holds maintenanceConfigurations/read and no action (no credentials).
param clusterName string
param functionsPrincipalId string

var aksClusterUserRole = '4abbcc35-e782-43d8-92c5-2d3f1bd2253f'
var reader = 'acdd72a7-3385-48ef-bd42-f606fba81ae7'

resource cluster 'Microsoft.ContainerService/managedClusters@2024-09-01' existing = {
  name: clusterName
}

resource clusterUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(cluster.id, functionsPrincipalId, aksClusterUserRole)
  scope: cluster
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', aksClusterUserRole)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource clusterReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(cluster.id, functionsPrincipalId, reader)
  scope: cluster
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', reader)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}
