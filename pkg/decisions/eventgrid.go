package decisions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/messaging"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azeventgrid"
)

// EnvEventGridEndpoint is the app setting naming the Event Grid topic
// decisions are published to: the topic's endpoint,
// https://<topic>.<region>-1.eventgrid.azure.net/api/events. Empty: decisions
// are only logged. The topic's input schema must be CloudEvents v1.0, and
// the Functions identity needs the "EventGrid Data Sender" role on it.
const EnvEventGridEndpoint = "KARPFUNC_DECISION_EVENTS_ENDPOINT"

// Event types, one per Kind.
var eventTypes = map[Kind]string{
	Launch:        "com.karpfunc.nodeclaim.launched.v1",
	GiveUp:        "com.karpfunc.nodeclaim.gaveup.v1",
	Interruption:  "com.karpfunc.nodeclaim.interrupted.v1",
	Consolidation: "com.karpfunc.nodeclaim.consolidated.v1",
	Disruption:    "com.karpfunc.nodeclaim.disrupted.v1",
}

// EventType is the CloudEvent type a decision is published as.
func EventType(k Kind) string {
	if eventType, ok := eventTypes[k]; ok {
		return eventType
	}
	return "com.karpfunc.decision." + string(k) + ".v1"
}

// EventGrid publishes decisions as CloudEvents 1.0 to an Event Grid topic
// with the Azure SDK's publisher client.
type EventGrid struct {
	client *azeventgrid.Client
}

// NewEventGrid returns a publisher for the topic at endpoint, signing in
// with cred. opts may set the transport (a test endpoint's CA) and retries.
func NewEventGrid(endpoint string, cred azcore.TokenCredential, opts *azeventgrid.ClientOptions) (*EventGrid, error) {
	parsed, err := url.Parse(endpoint)
	if err != nil || parsed.Scheme != "https" || parsed.Host == "" {
		return nil, fmt.Errorf("%s=%q is not an Event Grid topic endpoint such as https://<topic>.<region>-1.eventgrid.azure.net/api/events (az eventgrid topic show --query endpoint)",
			EnvEventGridEndpoint, endpoint)
	}
	if cred == nil {
		return nil, errors.New("decisions: Event Grid publisher needs a credential")
	}
	if opts == nil {
		opts = &azeventgrid.ClientOptions{}
	}
	if opts.Retry.MaxRetries == 0 {
		// One retry: the decision's invocation should not wait long on it.
		opts.Retry = policy.RetryOptions{MaxRetries: 1}
	}
	client, err := azeventgrid.NewClient(endpoint, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("decisions: Event Grid client for %s: %w", endpoint, err)
	}
	return &EventGrid{client: client}, nil
}

// Publish sends r as one CloudEvent: source /karpfunc/clusters/<cluster>,
// subject nodepools/<pool>/nodeclaims/<claim>, data the Record. Its id is
// derived from the decision, so a retried invocation's repeat has the same
// id and subscribers can drop it.
func (e *EventGrid) Publish(ctx context.Context, r Record) error {
	ev, err := CloudEvent(r)
	if err != nil {
		return err
	}
	if _, err := e.client.PublishCloudEvents(ctx, []messaging.CloudEvent{ev}, nil); err != nil {
		return fmt.Errorf("publishing %s for NodeClaim %s to Event Grid: %w", ev.Type, r.NodeClaim, err)
	}
	return nil
}

// CloudEvent is r as the CloudEvent Publish sends.
func CloudEvent(r Record) (messaging.CloudEvent, error) {
	subject := "nodepools/" + r.NodePool + "/nodeclaims/" + r.NodeClaim
	at := r.Time
	ev, err := messaging.NewCloudEvent("/karpfunc/clusters/"+r.Cluster, EventType(r.Decision), r,
		&messaging.CloudEventOptions{Subject: &subject, DataContentType: ptr("application/json"), Time: &at})
	if err != nil {
		return messaging.CloudEvent{}, fmt.Errorf("decisions: building the CloudEvent: %w", err)
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{string(r.Decision), r.Cluster, r.NodeClaim, r.Reason}, "\x00")))
	ev.ID = hex.EncodeToString(sum[:16])
	return ev, nil
}

func ptr[T any](v T) *T { return &v }
