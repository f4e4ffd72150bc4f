// Service Bus: the queues between the relay, the Functions and Event Grid.
// Standard tier (sessions and duplicate detection need it); local (SAS)
// authentication is disabled, so every sender and receiver is an identity
// with a data role scoped to the queues it uses.
param location string
param tags object
param token string
param functionsPrincipalId string
param relayPrincipalId string
param eventGridPrincipalId string

var dataSender = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
var dataReceiver = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'

// One entry per queue (names are pkg/bus's Queue* constants).
//   provision:    sessions keyed by cluster serialize provisioning passes;
//   lifecycle:    per-NodeClaim triggers and scheduled self-checks;
//   interruption: Event Grid VM-preemption notices. Event Grid cannot set a
//                 session ID, so this queue has no sessions.
//   disruption:   "look again" triggers (relay events, the Functions' own
//                 deadlines and validations); sessions keyed by cluster
//                 serialize disruption passes.
// Duplicate detection drops repeats of a message ID (the relay re-announces
// the same trigger with the same ID). A message that fails maxDeliveryCount
// times is dead-lettered, where it stays for inspection.
var queueSpecs = [
  { name: 'provision', sessions: true }
  { name: 'lifecycle', sessions: false }
  { name: 'interruption', sessions: false }
  { name: 'disruption', sessions: true }
]
var provision = 0
var lifecycle = 1
var interruption = 2
var disruption = 3

// Who may do what on which queue.
var grants = [
  { queue: provision, principalId: functionsPrincipalId, role: dataReceiver }
  { queue: lifecycle, principalId: functionsPrincipalId, role: dataReceiver }
  { queue: interruption, principalId: functionsPrincipalId, role: dataReceiver }
  { queue: lifecycle, principalId: functionsPrincipalId, role: dataSender }
  { queue: disruption, principalId: functionsPrincipalId, role: dataReceiver }
  { queue: disruption, principalId: functionsPrincipalId, role: dataSender }
  { queue: disruption, principalId: relayPrincipalId, role: dataSender }
  { queue: provision, principalId: relayPrincipalId, role: dataSender }
  { queue: lifecycle, principalId: relayPrincipalId, role: dataSender }
  { queue: interruption, principalId: eventGridPrincipalId, role: dataSender }
]

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: 'sb-karpfunc-${token}'
  location: location
  tags: tags
  sku: { name: 'Standard', tier: 'Standard' }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
  }
}

resource queue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = [for q in queueSpecs: {
  parent: namespace
  name: q.name
  properties: {
    requiresSession: q.sessions
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    maxDeliveryCount: 10
    lockDuration: 'PT5M'
    defaultMessageTimeToLive: 'P1D'
    deadLetteringOnMessageExpiration: true
  }
}]

resource grant 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for g in grants: {
  name: guid(queue[g.queue].id, g.principalId, g.role)
  scope: queue[g.queue]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', g.role)
    principalId: g.principalId
    principalType: 'ServicePrincipal'
  }
}]

output namespaceId string = namespace.id
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
output queueNames object = {
  provision: queue[provision].name
  lifecycle: queue[lifecycle].name
  interruption: queue[interruption].name
  disruption: queue[disruption].name
}
output interruptionQueueId string = queue[interruption].id
