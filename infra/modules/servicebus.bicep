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
var dataOwner = '090c5cfd-751d-490a-894a-3ce6f1109419'

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

// Who may do what on which queue: pkg/bus's QueueRights, role by role
// (infra's TestQueueGrants checks the two agree). Data Sender gives Send;
// Data Owner gives Send, Listen and Manage.
//   functions: receives every trigger queue and reads its runtime
//              properties (Manage), which target-based scaling needs: without
//              it the scale monitor falls back to the oldest message's age.
//              Data Owner is the only built-in role with Manage; scoped to the
//              queue, it also covers the Function's own sends (provision
//              retries and re-provisioning, lifecycle checks, disruption
//              validations).
//   relay:     sends cluster events to every queue.
//   eventGrid: delivers VM preemption notices to interruption.
var grants = [
  { queue: provision, principalId: functionsPrincipalId, role: dataOwner }
  { queue: lifecycle, principalId: functionsPrincipalId, role: dataOwner }
  { queue: interruption, principalId: functionsPrincipalId, role: dataOwner }
  { queue: disruption, principalId: functionsPrincipalId, role: dataOwner }
  { queue: provision, principalId: relayPrincipalId, role: dataSender }
  { queue: lifecycle, principalId: relayPrincipalId, role: dataSender }
  { queue: interruption, principalId: relayPrincipalId, role: dataSender }
  { queue: disruption, principalId: relayPrincipalId, role: dataSender }
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
