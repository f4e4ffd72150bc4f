package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ServiceBusOptions says how to reach a Service Bus namespace. Exactly one of
// ConnectionString and Namespace is used: a connection string wins (it is how
// the local emulator and SAS-keyed namespaces are reached); otherwise
// Namespace is authenticated with an Azure identity.
type ServiceBusOptions struct {
	// ConnectionString is a namespace or emulator connection string
	// ("Endpoint=sb://…;SharedAccessKeyName=…;SharedAccessKey=…", or
	// "…;UseDevelopmentEmulator=true"). It is a secret: never log it.
	ConnectionString string
	// Namespace is the fully qualified namespace
	// ("<name>.servicebus.windows.net"), used with an Azure identity when
	// ConnectionString is empty.
	Namespace string
	// ClientID selects a user-assigned managed identity (or the workload
	// identity's client ID). Empty means the system-assigned identity, or the
	// AZURE_CLIENT_ID the workload identity webhook injected.
	ClientID string
	// Credential overrides the identity chosen from ClientID and the
	// environment. Optional; for callers that already hold a credential.
	Credential azcore.TokenCredential
	// ClientOptions are passed to azservicebus (retries, custom endpoint).
	ClientOptions *azservicebus.ClientOptions
}

// serviceBusPublisher sends through azservicebus, one cached Sender per queue
// (a Sender owns an AMQP link; opening one per Publish would cost a round trip
// and a link attach every time).
type serviceBusPublisher struct {
	client *azservicebus.Client

	mu      sync.Mutex
	senders map[string]*azservicebus.Sender
	closed  bool
}

// NewServiceBusPublisher returns a Publisher for a Service Bus namespace. It
// does not connect: azservicebus opens the connection on the first send, so a
// wrong endpoint or missing role shows up as a Publish error.
func NewServiceBusPublisher(ctx context.Context, opts ServiceBusOptions) (Publisher, error) {
	_ = ctx // reserved: construction does no I/O today.
	client, err := newServiceBusClient(opts)
	if err != nil {
		return nil, err
	}
	return &serviceBusPublisher{client: client, senders: map[string]*azservicebus.Sender{}}, nil
}

func newServiceBusClient(opts ServiceBusOptions) (*azservicebus.Client, error) {
	switch {
	case opts.ConnectionString != "":
		client, err := azservicebus.NewClientFromConnectionString(opts.ConnectionString, opts.ClientOptions)
		if err != nil {
			// The SDK's parse errors do not echo the string, so this does not leak the key.
			return nil, fmt.Errorf("bus: service bus connection string: %w", err)
		}
		return client, nil
	case opts.Namespace != "":
		cred := opts.Credential
		if cred == nil {
			var err error
			if cred, err = identityCredential(opts.ClientID); err != nil {
				return nil, err
			}
		}
		client, err := azservicebus.NewClient(opts.Namespace, cred, opts.ClientOptions)
		if err != nil {
			return nil, fmt.Errorf("bus: service bus namespace %q: %w", opts.Namespace, err)
		}
		return client, nil
	default:
		return nil, errors.New("bus: service bus needs a connection string or a fully qualified namespace; both are empty")
	}
}

// identityCredential picks the identity the process actually has: in a pod
// with Azure Workload Identity the webhook mounts a federated token file (the
// relay's case); on a Function App it is the app's managed identity. IMDS is
// not reachable from a workload-identity pod, so guessing wrong fails late and
// obscurely; deciding from the environment fails early and clearly.
func identityCredential(clientID string) (azcore.TokenCredential, error) {
	if os.Getenv("AZURE_FEDERATED_TOKEN_FILE") != "" {
		cred, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{ClientID: clientID})
		if err != nil {
			return nil, fmt.Errorf("bus: workload identity credential: %w", err)
		}
		return cred, nil
	}
	credOpts := &azidentity.ManagedIdentityCredentialOptions{}
	if clientID != "" {
		credOpts.ID = azidentity.ClientID(clientID)
	}
	cred, err := azidentity.NewManagedIdentityCredential(credOpts)
	if err != nil {
		return nil, fmt.Errorf("bus: managed identity credential: %w", err)
	}
	return cred, nil
}

// Publish sends msgs to queue. Messages without a ScheduledEnqueueTime go in
// message batches: one batch is atomic, so when all of them fit in one (the
// usual case) it is all or none; more than a batch's worth is sent as several
// batches, in order, and an error says how many already went. Scheduled
// messages go through Sender.ScheduleMessages, one call per distinct time.
func (p *serviceBusPublisher) Publish(ctx context.Context, queue string, msgs ...Message) error {
	if err := ValidateMessages(queue, msgs); err != nil {
		return err
	}
	sender, err := p.sender(queue)
	if err != nil {
		return err
	}
	now, scheduled := splitScheduled(msgs)
	if len(now) > 0 {
		if err := sendBatches(ctx, sender, queue, now); err != nil {
			return err
		}
	}
	for _, group := range scheduled {
		if _, err := sender.ScheduleMessages(ctx, group.msgs, group.at, nil); err != nil {
			return fmt.Errorf("bus: scheduling %d message(s) on queue %q for %s: %w",
				len(group.msgs), queue, group.at.UTC().Format(time.RFC3339), err)
		}
	}
	return nil
}

func (p *serviceBusPublisher) sender(queue string) (*azservicebus.Sender, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("bus: publisher is closed")
	}
	if cached, ok := p.senders[queue]; ok {
		return cached, nil
	}
	created, err := p.client.NewSender(queue, nil)
	if err != nil {
		return nil, fmt.Errorf("bus: sender for queue %q: %w", queue, err)
	}
	p.senders[queue] = created
	return created, nil
}

func sendBatches(ctx context.Context, sender *azservicebus.Sender, queue string, msgs []*azservicebus.Message) error {
	sent := 0
	batch, err := sender.NewMessageBatch(ctx, nil)
	if err != nil {
		return fmt.Errorf("bus: new message batch for queue %q: %w", queue, err)
	}
	flush := func() error {
		count := int(batch.NumMessages())
		if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
			return fmt.Errorf("bus: sending batch of %d message(s) to queue %q (%d of %d already sent): %w",
				count, queue, sent, len(msgs), err)
		}
		sent += count
		return nil
	}
	for _, msg := range msgs {
		err := batch.AddMessage(msg, nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && batch.NumMessages() > 0 {
			if err := flush(); err != nil {
				return err
			}
			if batch, err = sender.NewMessageBatch(ctx, nil); err != nil {
				return fmt.Errorf("bus: new message batch for queue %q: %w", queue, err)
			}
			err = batch.AddMessage(msg, nil)
		}
		if err != nil {
			return fmt.Errorf("bus: message %q (%d bytes) for queue %q: %w (%d of %d already sent)",
				*msg.MessageID, len(msg.Body), queue, err, sent, len(msgs))
		}
	}
	return flush()
}

type scheduledGroup struct {
	at   time.Time
	msgs []*azservicebus.Message
}

// splitScheduled converts msgs and separates the ones to send now from the
// scheduled ones, grouped by time (ScheduleMessages takes one time per call)
// and ordered by it.
func splitScheduled(msgs []Message) (now []*azservicebus.Message, scheduled []scheduledGroup) {
	byTime := map[int64]int{}
	for _, msg := range msgs {
		sb := toServiceBusMessage(msg)
		if msg.ScheduledEnqueueTime.IsZero() {
			now = append(now, sb)
			continue
		}
		key := msg.ScheduledEnqueueTime.UnixNano()
		groupIndex, ok := byTime[key]
		if !ok {
			groupIndex = len(scheduled)
			byTime[key] = groupIndex
			scheduled = append(scheduled, scheduledGroup{at: msg.ScheduledEnqueueTime})
		}
		scheduled[groupIndex].msgs = append(scheduled[groupIndex].msgs, sb)
	}
	sort.SliceStable(scheduled, func(i, j int) bool { return scheduled[i].at.Before(scheduled[j].at) })
	return now, scheduled
}

// toServiceBusMessage maps a bus.Message onto the SDK's message. Empty
// optional fields stay nil so the broker applies its defaults (an empty
// SessionID is a valid session and must not be sent by accident).
func toServiceBusMessage(m Message) *azservicebus.Message {
	out := &azservicebus.Message{
		MessageID: ptr(m.ID),
		Body:      m.Body,
	}
	if m.SessionID != "" {
		out.SessionID = ptr(m.SessionID)
	}
	if m.ContentType != "" {
		out.ContentType = ptr(m.ContentType)
	}
	if !m.ScheduledEnqueueTime.IsZero() {
		at := m.ScheduledEnqueueTime.UTC()
		out.ScheduledEnqueueTime = &at
	}
	if len(m.ApplicationProperties) > 0 {
		out.ApplicationProperties = make(map[string]any, len(m.ApplicationProperties))
		for key, value := range m.ApplicationProperties {
			out.ApplicationProperties[key] = value
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// Close closes every cached Sender and then the client, returning all errors.
func (p *serviceBusPublisher) Close(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for queue, sender := range p.senders {
		if err := sender.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("bus: closing sender for queue %q: %w", queue, err))
		}
	}
	p.senders = nil
	if err := p.client.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("bus: closing service bus client: %w", err))
	}
	return errors.Join(errs...)
}
