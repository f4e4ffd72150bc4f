// Spot preemption notices: Azure Resource Notifications publishes a
// ResourceAnnotated event when a VM is preempted; this system topic on the
// subscription's health resources delivers those for the cluster's node
// resource group to the interruption queue, as the Event Grid identity
// (deliveryWithResourceIdentity; no SAS key exists on the namespace).
param tags object
param token string
param eventGridIdentityId string
param interruptionQueueId string
@description('Only VMs in this resource group are the cluster\'s nodes.')
param nodeResourceGroupId string

resource topic 'Microsoft.EventGrid/systemTopics@2025-02-15' = {
  name: 'evgt-karpfunc-health-${token}'
  location: 'global'
  tags: tags
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${eventGridIdentityId}': {} }
  }
  properties: {
    source: subscription().id
    topicType: 'Microsoft.ResourceNotifications.HealthResources'
  }
}

resource preempted 'Microsoft.EventGrid/systemTopics/eventSubscriptions@2025-02-15' = {
  parent: topic
  name: 'vm-preempted-to-interruption-queue'
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
