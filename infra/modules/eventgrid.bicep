// Spot preemption notices: Azure Resource Notifications publishes a
// ResourceAnnotated event when a VM is preempted; this system topic on the
// subscription's health resources delivers those for the cluster's node
// resource group to the interruption queue, as the Event Grid identity
// (deliveryWithResourceIdentity; no SAS key exists on the namespace).
//
// A subscription holds one HealthResources system topic. This module is
// deployed in the topic's resource group and writes the topic either way:
// new (karpfunc's), or the existing one with its identities and tags kept
// and karpfunc's Event Grid identity added. The event subscription's name
// carries the environment's token, so karpfunc environments sharing the
// topic do not overwrite each other's.
param topicName string
param topicTags object
@description('User-assigned identities (resource IDs) the topic already has; kept.')
param keptIdentityIds array
@description('Whether the topic already has its system-assigned identity; kept.')
param keepSystemAssigned bool
param token string
param eventGridIdentityId string
param interruptionQueueId string
@description('Only VMs in this resource group are the cluster\'s nodes.')
param nodeResourceGroupId string

resource topic 'Microsoft.EventGrid/systemTopics@2025-02-15' = {
  name: topicName
  location: 'global'
  tags: topicTags
  identity: {
    type: keepSystemAssigned ? 'SystemAssigned, UserAssigned' : 'UserAssigned'
    // Resource IDs compare case-insensitively: drop a kept copy of ours
    // (a rerun) so the object has no two keys for one identity.
    userAssignedIdentities: toObject(union(filter(keptIdentityIds, id => toLower(id) != toLower(eventGridIdentityId)), [eventGridIdentityId]), id => id, id => {})
  }
  properties: {
    source: subscription().id
    topicType: 'Microsoft.ResourceNotifications.HealthResources'
  }
}

resource preempted 'Microsoft.EventGrid/systemTopics/eventSubscriptions@2025-02-15' = {
  parent: topic
  name: 'karpfunc-${token}-vm-preempted'
  properties: {
    eventDeliverySchema: 'CloudEventSchemaV1_0'
    filter: {
      includedEventTypes: ['Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated']
      enableAdvancedFilteringOnArrays: true
      advancedFilters: [
        {
          operatorType: 'StringIn'
          key: 'data.resourceInfo.properties.annotationName'
          values: ['VirtualMachinePreempted']
        }
        {
          // Event Grid string filters are case-insensitive, as resource IDs are.
          operatorType: 'StringBeginsWith'
          key: 'data.resourceInfo.properties.targetResourceId'
          values: ['${nodeResourceGroupId}/providers/Microsoft.Compute/virtualMachines/']
        }
      ]
    }
    deliveryWithResourceIdentity: {
      identity: {
        type: 'UserAssigned'
        userAssignedIdentity: eventGridIdentityId
      }
      destination: {
        endpointType: 'ServiceBusQueue'
        properties: {
          resourceId: interruptionQueueId
        }
      }
    }
    retryPolicy: {
      maxDeliveryAttempts: 30
      eventTimeToLiveInMinutes: 60
    }
  }
}

output systemTopicName string = topic.name
