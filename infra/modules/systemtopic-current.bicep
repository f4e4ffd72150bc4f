// Reads an existing Event Grid system topic, so the deployment that adds
// karpfunc's identity to it keeps what it already has. A separate module:
// reading a resource and writing it in one template would make the write
// depend on itself. The full reference (not the resource symbol) because a
// topic may have no identity and no tags at all: the safe-dereference
// operator then yields null instead of failing the deployment.
param topicName string

resource topic 'Microsoft.EventGrid/systemTopics@2025-02-15' existing = {
  name: topicName
}

var current = reference(topic.id, '2025-02-15', 'Full')

output userAssignedIdentityIds array = objectKeys(current.?identity.?userAssignedIdentities ?? {})
output systemAssigned bool = contains(current.?identity.?type ?? 'None', 'SystemAssigned')
output tags object = current.?tags ?? {}
