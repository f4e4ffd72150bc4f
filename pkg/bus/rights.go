package bus

import (
	"errors"
	"fmt"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Identity names one of the principals that use karpfunc's queues. In Azure
// each is a managed identity (infra/modules/identities.bicep) or Event
// Grid's system topic identity; locally each presents its own credential
// to the local bus.
type Identity string

// The identities that send to and receive from karpfunc's queues.
const (
	// IdentityFunctions is the Function App's user-assigned identity: the
	// Functions host receives with it (ServiceBusConnection__clientId) and
	// the handler sends with it (scheduled self-messages, retries).
	IdentityFunctions Identity = "functions"
	// IdentityRelay is the in-cluster relay's workload identity.
	IdentityRelay Identity = "relay"
	// IdentityEventGrid is the health-resources system topic's identity,
	// with which its subscription delivers to the interruption queue.
	IdentityEventGrid Identity = "eventGrid"
)

// Claim is a Service Bus right on an entity, named as Service Bus names
// it in its "'Send' claim(s) are required" errors.
type Claim string

// Service Bus's claims. Azure Service Bus Data Sender grants Send, Data
// Receiver grants Listen, Data Owner grants all three (Learn: "Authenticate
// a managed identity with Microsoft Entra ID to access Azure Service Bus
// resources", built-in roles).
const (
	ClaimSend   Claim = "Send"
	ClaimListen Claim = "Listen"
	// ClaimManage reads an entity's runtime properties. The Service Bus
	// extension's scale monitor reads the queue's message count with it;
	// without it the monitor logs "does not have Manage claim" and falls
	// back to the first message's enqueued time, so Flex Consumption
	// scales on estimates (Azure/azure-sdk-for-net
	// sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus/src/Listeners/ServiceBusMetricsProvider.cs;
	// azure-docs includes/functions-service-bus-permissions.md lists Data
	// Owner for triggers).
	ClaimManage Claim = "Manage"
)

// Grant gives an identity claims on one queue.
type Grant struct {
	Identity Identity
	Queue    string
	Claims   []Claim
}

// QueueRights is who may do what on which queue (logical queue names), the
// one table the deployment's role assignments (infra/modules/servicebus.bicep,
// checked by infra's tests) and the local bus's authorization both follow.
// A send or receive it does not list fails, in Azure and locally, with
// Service Bus's unauthorized error.
//
//   - The Functions identity receives every trigger queue and reads its
//     runtime properties (target-based scaling); it sends to provision
//     (retries, re-provisioning after a termination), lifecycle (liveness
//     checks, drain retries) and disruption (validations, deadlines).
//   - The relay sends cluster events to every queue: pending pods to
//     provision, Node and NodeClaim changes to lifecycle, PreemptionScheduled
//     conditions to interruption, disruption triggers to disruption.
//   - Event Grid delivers VM preemption notices to interruption.
var QueueRights = []Grant{
	{IdentityFunctions, QueueProvision, []Claim{ClaimListen, ClaimManage, ClaimSend}},
	{IdentityFunctions, QueueLifecycle, []Claim{ClaimListen, ClaimManage, ClaimSend}},
	{IdentityFunctions, QueueInterruption, []Claim{ClaimListen, ClaimManage}},
	{IdentityFunctions, QueueDisruption, []Claim{ClaimListen, ClaimManage, ClaimSend}},
	{IdentityRelay, QueueProvision, []Claim{ClaimSend}},
	{IdentityRelay, QueueLifecycle, []Claim{ClaimSend}},
	{IdentityRelay, QueueInterruption, []Claim{ClaimSend}},
	{IdentityRelay, QueueDisruption, []Claim{ClaimSend}},
	{IdentityEventGrid, QueueInterruption, []Claim{ClaimSend}},
}

// Allowed reports whether grants give identity claim on queue.
func Allowed(grants []Grant, identity Identity, queue string, claim Claim) bool {
	return slices.ContainsFunc(grants, func(g Grant) bool {
		return g.Identity == identity && g.Queue == queue && slices.Contains(g.Claims, claim)
	})
}

// Named returns grants with each logical queue replaced by the entity name
// names maps it to (queues it does not map keep their name), for a bus whose
// queues the app settings rename.
func Named(grants []Grant, names QueueNames) []Grant {
	out := make([]Grant, len(grants))
	for i, grant := range grants {
		if name, ok := names[grant.Queue]; ok {
			grant.Queue = name
		}
		grant.Claims = slices.Clone(grant.Claims)
		out[i] = grant
	}
	return out
}

// UnauthorizedError is Service Bus's refusal of an operation the caller's
// identity has no claim for (AMQP amqp:unauthorized-access, HTTP 401). It
// unwraps to an *azservicebus.Error with Code azservicebus.CodeUnauthorizedAccess,
// the shape azservicebus surfaces, so callers handle both transports alike.
type UnauthorizedError struct {
	// Description is the service's text: "Unauthorized access. 'Send'
	// claim(s) are required to perform this operation. Resource: '…'."
	Description string
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("(%s): %s", azservicebus.CodeUnauthorizedAccess, e.Description)
}

// Unwrap returns the azservicebus error code the SDK would report.
func (e *UnauthorizedError) Unwrap() error {
	return &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}
}

// IsUnauthorized reports whether err is Service Bus's unauthorized error,
// from azservicebus or from the local bus.
func IsUnauthorized(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeUnauthorizedAccess
}

// UnauthorizedDescription is Service Bus's description of a refused
// operation: the claim it needed and the entity
// (azservicebus client_test.go TestClientUnauthorizedCreds shows the text).
func UnauthorizedDescription(claim Claim, resource string) string {
	return fmt.Sprintf("Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: '%s'.", claim, resource)
}
