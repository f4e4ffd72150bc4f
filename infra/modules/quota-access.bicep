// The Functions identity reads the subscription's compute quota and use in
// the cluster's region (GET /subscriptions/{sub}/providers/Microsoft.Compute/
// locations/{region}/usages, action Microsoft.Compute/locations/usages/read),
// so that provisioning plans no launch quota would refuse (docs/quota.md).
// The usages are a subscription-level resource: no role on a resource group
// reaches them. Reader at the subscription holds the action through */read;
// it is the narrowest built-in role found that does and can write nothing.
// The built-in roles that name Microsoft.Compute/locations/* outright
// (Virtual Machine Contributor among them, Learn "Azure built-in roles for
// Compute") would also let it create and delete VMs anywhere in the
// subscription. Reader gives no action (no keys, no credentials); it does
// let the identity list the subscription's resources and their properties.
// Without this assignment karpfunc still works: it learns quota from
// refused creates alone and logs once that it does.
targetScope = 'subscription'

param functionsPrincipalId string

var reader = 'acdd72a7-3385-48ef-bd42-f606fba81ae7'

resource quotaReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(subscription().id, functionsPrincipalId, reader)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', reader)
    principalId: functionsPrincipalId
    principalType: 'ServicePrincipal'
  }
}
