package localbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// Authorization. With Options.Rights set the bus authorizes per identity as
// Service Bus does with Entra ID (local auth disabled, data roles scoped to
// queues): an identity may send to a queue only with a Send claim on it,
// receive and settle only with Listen, read runtime properties only with
// Manage. A refused operation is Service Bus's unauthorized access
// (*bus.UnauthorizedError; HTTP 401), so a grant missing from bus.QueueRights
// fails locally as it would in Azure.
//
// An identity is named when it connects: in process with As, over HTTP by
// the bearer credential Credential minted for it. The Bus's own methods
// (Publish, Receive, …) act as the namespace's owner, as someone holding
// Azure Service Bus Data Owner on the namespace would (the portal's Service
// Bus Explorer); tests inject and inspect messages through them.

// namespaceURI names the local namespace in error texts, as
// "sb://<namespace>.servicebus.windows.net/<queue>" names a real entity.
const namespaceURI = "sb://localhost/"

// Credential returns the bearer credential identity presents to the HTTP
// API (bus.EnvLocalBusCredential), the same one on every call.
func (b *Bus) Credential(identity bus.Identity) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for token, id := range b.credentials {
		if id == identity {
			return token
		}
	}
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	token := hex.EncodeToString(raw)
	b.credentials[token] = identity
	return token
}

// identityOf resolves an Authorization header to the identity whose
// credential it carries.
func (b *Bus) identityOf(header string) (bus.Identity, error) {
	token, ok := strings.CutPrefix(header, "Bearer ")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.opts.Rights == nil {
		return "", nil
	}
	if id, known := b.credentials[token]; ok && known {
		return id, nil
	}
	reason := "the request carries no credential (want Authorization: Bearer <credential>, bus." + bus.EnvLocalBusCredential + ")"
	if header != "" {
		reason = "the credential is not one this bus issued"
	}
	return "", &bus.UnauthorizedError{Description: "Unauthorized access: " + reason + ". Resource: '" + namespaceURI + "'."}
}

// authorize returns nil when the rights give identity claim on queue, or
// Service Bus's unauthorized error. A bus without Rights authorizes
// everything. Callers hold b.mu.
func (b *Bus) authorize(identity bus.Identity, queue string, claim bus.Claim) error {
	if b.opts.Rights == nil || bus.Allowed(b.opts.Rights, identity, queue, claim) {
		return nil
	}
	return &bus.UnauthorizedError{Description: fmt.Sprintf("%s Identity %q has no role granting %s on queue %q: add the grant to bus.QueueRights and infra/modules/servicebus.bicep.",
		bus.UnauthorizedDescription(claim, namespaceURI+queue), identity, claim, queue)}
}

// Client is the bus as one identity sees it: every operation is authorized
// against the bus's Rights.
type Client struct {
	bus      *Bus
	identity bus.Identity
}

// As returns the bus as identity.
func (b *Bus) As(identity bus.Identity) *Client { return &Client{bus: b, identity: identity} }

// Identity is who the client acts as.
func (c *Client) Identity() bus.Identity { return c.identity }

// Publish sends msgs to queue; it needs Send.
func (c *Client) Publish(ctx context.Context, queue string, msgs ...bus.Message) error {
	if err := c.check(queue, bus.ClaimSend); err != nil {
		return err
	}
	return c.bus.Publish(ctx, queue, msgs...)
}

// Close does nothing: the bus belongs to its owner.
func (c *Client) Close(context.Context) error { return nil }

// Receive waits for the next message of queue; it needs Listen.
func (c *Client) Receive(ctx context.Context, queue string) (*Delivery, error) {
	if err := c.check(queue, bus.ClaimListen); err != nil {
		return nil, err
	}
	return c.bus.Receive(ctx, queue)
}

// Complete settles a delivery; it needs Listen.
func (c *Client) Complete(d *Delivery) error {
	if err := c.check(d.Queue, bus.ClaimListen); err != nil {
		return err
	}
	return c.bus.Complete(d)
}

// Abandon releases a delivery; it needs Listen.
func (c *Client) Abandon(d *Delivery, description string) error {
	if err := c.check(d.Queue, bus.ClaimListen); err != nil {
		return err
	}
	return c.bus.Abandon(d, description)
}

// RuntimeProperties returns queue's counters, as the Service Bus
// administration client's GetQueueRuntimeProperties does; it needs Manage.
func (c *Client) RuntimeProperties(queue string) (QueueStats, error) {
	if err := c.check(queue, bus.ClaimManage); err != nil {
		return QueueStats{}, err
	}
	stats, ok := c.bus.Stats()[queue]
	if !ok {
		return QueueStats{}, &QueueNotFoundError{Queue: queue}
	}
	return stats, nil
}

func (c *Client) check(queue string, claim bus.Claim) error {
	c.bus.mu.Lock()
	defer c.bus.mu.Unlock()
	return c.bus.authorize(c.identity, queue, claim)
}

var _ bus.Publisher = (*Client)(nil)
