// Reads an existing Event Grid system topic, so the deployment that adds
// karpfunc's identity to it keeps what it already has. A separate module:
// reading a resource and writing it in one template would make the write
// depend on itself.
param topicName string

resource topic 'Microsoft.EventGrid/systemTopics@2025-02-15' existing = {
  name: topicName
}

output userAssignedIdentityIds array = objectKeys(topic.?identity.?userAssignedIdentities ?? {})
output systemAssigned bool = contains(topic.?identity.?type ?? 'None', 'SystemAssigned')
output tags object = topic.?tags ?? {}
