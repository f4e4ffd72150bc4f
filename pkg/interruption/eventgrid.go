package interruption

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/messaging"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azsystemevents"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

// Application properties Event Grid sets on every message it delivers to a
// Service Bus queue.
const (
	PropEventType        = "aeg-event-type" // "Notification" for events
	PropSubscriptionName = "aeg-subscription-name"
	PropDeliveryCount    = "aeg-delivery-count"
	PropMetadataVersion  = "aeg-metadata-version"
	PropDataVersion      = "aeg-data-version"
	PropOutputEventID    = "aeg-output-event-id"
)

// AEGNotification is the aeg-event-type of an event (as opposed to a
// subscription validation handshake, which only webhooks receive).
const AEGNotification = "Notification"

// Health-resources annotations (ResourceAnnotated, resourceInfo.properties
// .annotationName; Azure Resource Health's VM annotations).
const (
	// AnnotationPreempted: a spot VM was taken back (capacity recall or
	// price above its max). The only documented annotation that means the
	// VM itself is gone; the others are reboots, freezes, live migrations,
	// redeploys and user operations on a VM that stays.
	AnnotationPreempted = "VirtualMachinePreempted"
)

// resourceTypeVM is the targetResourceType of a standalone VM; scale-set
// VMs are not karpfunc's.
const resourceTypeVM = "Microsoft.Compute/virtualMachines"

// IsEventGrid reports whether body looks like an Event Grid delivery (an
// Event Grid schema event or a CloudEvent from Azure), as opposed to
// karpfunc's own relay event, or carries Event Grid's aeg-* properties.
func IsEventGrid(body []byte, props map[string]any) bool {
	for key := range props {
		if strings.HasPrefix(strings.ToLower(key), "aeg-") {
			return true
		}
	}
	var probe struct {
		EventType string `json:"eventType"`
		Type      string `json:"type"`
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return true
	}
	if json.Unmarshal(trimmed, &probe) != nil {
		return false
	}
	return probe.EventType != "" || strings.HasPrefix(probe.Type, "Microsoft.")
}

// ParseEventGrid reads one message Event Grid delivered to the interruption
// queue, in either delivery schema, with its application properties. It
// returns a Signal for a VirtualMachinePreempted annotation, an
// IgnoredError for any other well-formed event, and a messages.InvalidError
// for a body that cannot be read (dead-lettered with the reason).
func ParseEventGrid(body []byte, props map[string]any) (Signal, error) {
	sig := Signal{Source: SourceEventGrid}
	if eventType, ok := stringProp(props, PropEventType); ok && eventType != AEGNotification {
		return sig, NewIgnoredError("%s is %q, not %q", PropEventType, eventType, AEGNotification)
	}
	if count, ok := stringProp(props, PropDeliveryCount); ok {
		sig.DeliveryCount, _ = strconv.Atoi(count)
	}
	event, err := singleEvent(body)
	if err != nil {
		return sig, err
	}
	typ, data, err := sig.readEnvelope(event)
	if err != nil {
		return sig, err
	}
	if typ != azsystemevents.TypeResourceNotificationsHealthResourcesAnnotated {
		return sig, NewIgnoredError("event %s is of type %q; the interruption queue's subscription should deliver only %s",
			sig.EventID, typ, azsystemevents.TypeResourceNotificationsHealthResourcesAnnotated)
	}
	if len(data) == 0 {
		return sig, messages.NewInvalidError("%s event %s has no data", typ, sig.EventID)
	}
	var ann azsystemevents.ResourceNotificationsHealthResourcesAnnotatedEventData
	if err := ann.UnmarshalJSON(data); err != nil {
		return sig, messages.NewInvalidError("%s event %s data: %v", typ, sig.EventID, err)
	}
	if ann.ResourceDetails == nil || ann.ResourceDetails.Properties == nil {
		return sig, messages.NewInvalidError("%s event %s has no resourceInfo.properties", typ, sig.EventID)
	}
	return sig, sig.readPreemption(typ, &ann)
}

// singleEvent is the one event of an Event Grid message body. Event Grid
// sends one event per Service Bus message; an array (the webhook batch
// form) is read when it holds exactly one.
func singleEvent(body []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return trimmed, nil
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(trimmed, &arr); err != nil {
		return nil, messages.NewInvalidError("Event Grid message is not JSON: %v", err)
	}
	if len(arr) != 1 {
		return nil, messages.NewInvalidError("Event Grid message holds %d events; Service Bus deliveries carry exactly one", len(arr))
	}
	return arr[0], nil
}

// readEnvelope reads an event in either delivery schema (CloudEvents 1.0 or
// the Event Grid schema) into s's schema and event ID, and returns its
// type and data.
func (s *Signal) readEnvelope(event []byte) (string, []byte, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(event, &keys); err != nil {
		return "", nil, messages.NewInvalidError("Event Grid message is not a JSON object: %v", err)
	}
	switch {
	case keys["specversion"] != nil:
		s.Schema = SchemaCloudEvents
		var ce messaging.CloudEvent
		if err := ce.UnmarshalJSON(event); err != nil {
			return "", nil, messages.NewInvalidError("CloudEvent from Event Grid: %v", err)
		}
		s.EventID = ce.ID
		data, _ := ce.Data.([]byte)
		return ce.Type, data, nil
	case keys["eventType"] != nil:
		s.Schema = SchemaEventGrid
		var ev azsystemevents.EventGridEvent
		if err := ev.UnmarshalJSON(event); err != nil {
			return "", nil, messages.NewInvalidError("Event Grid schema event: %v", err)
		}
		s.EventID = deref(ev.ID)
		data, _ := ev.Data.([]byte)
		if data == nil && keys["data"] != nil {
			data = keys["data"]
		}
		return deref(ev.EventType), data, nil
	default:
		return "", nil, messages.NewInvalidError("message has neither \"specversion\" (CloudEvents 1.0) nor \"eventType\" (Event Grid schema)")
	}
}

// readPreemption reads a health resources annotation of type typ (its
// resourceInfo.properties set) into s when it says a standalone VM was
// preempted; other annotations are ignored.
func (s *Signal) readPreemption(typ string, ann *azsystemevents.ResourceNotificationsHealthResourcesAnnotatedEventData) error {
	props := ann.ResourceDetails.Properties
	name, _ := props["annotationName"].(string)
	target, _ := props["targetResourceId"].(string)
	targetType, _ := props["targetResourceType"].(string)
	if name == "" || target == "" {
		return messages.NewInvalidError("%s event %s lacks resourceInfo.properties.annotationName or targetResourceId", typ, s.EventID)
	}
	if targetType != "" && !strings.EqualFold(targetType, resourceTypeVM) {
		return NewIgnoredError("annotation %s is on a %s, not a standalone VM", name, targetType)
	}
	if name != AnnotationPreempted {
		return NewIgnoredError("annotation %s on %s does not mean the VM is going away", name, target)
	}
	s.ProviderID = "azure://" + target
	s.Gone = true
	// After the fact: the deadline is when it happened (the VM is gone).
	s.Deadline = parseTime(props["occurredTime"])
	if s.Deadline.IsZero() && ann.OperationalDetails != nil && ann.OperationalDetails.ResourceEventTime != nil {
		s.Deadline = ann.OperationalDetails.ResourceEventTime.UTC()
	}
	if s.Deadline.IsZero() {
		s.DeadlineAssumed = true
	}
	reason, _ := props["reason"].(string)
	s.Detail = fmt.Sprintf("Azure preempted the spot VM (Event Grid %s, %s)", name, strings.TrimSpace(reason))
	return nil
}

func parseTime(v any) time.Time {
	text, _ := v.(string)
	if text == "" {
		return time.Time{}
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999"} {
		if at, err := time.Parse(layout, text); err == nil {
			return at.UTC()
		}
	}
	return time.Time{}
}

// stringProp reads an application property case-insensitively; values
// may arrive as strings or numbers.
func stringProp(props map[string]any, key string) (string, bool) {
	for name, value := range props {
		if !strings.EqualFold(name, key) {
			continue
		}
		switch x := value.(type) {
		case string:
			return x, true
		case nil:
			return "", false
		default:
			return fmt.Sprint(x), true
		}
	}
	return "", false
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
