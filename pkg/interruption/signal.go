// Package interruption turns Azure's spot-preemption signals into a
// replacement first and a drain that fits inside the notice.
//
// Two signals announce the same preemption, and any number of copies of each
// may arrive (redelivery, both Event Grid schemas):
//
//   - before: the node condition PreemptionScheduled=True that AKS's
//     node-problem-detector sets from the VM's Scheduled Events (Preempt, at
//     least 30 s ahead), with the deadline in its message; the relay forwards
//     it at once (ParseNodeCondition);
//   - after: the Event Grid system event ResourceAnnotated with annotation
//     VirtualMachinePreempted from Azure Resource Notifications (health
//     resources), delivered to a Service Bus queue in the Event Grid or the
//     CloudEvents 1.0 schema (ParseEventGrid).
//
// Parsing is pure. The Controller acts, and keeps every fact on the
// NodeClaim (the deadline annotation and the DisruptionReason condition, see
// pkg/lifecycle), so duplicates converge on one replacement and one drain.
package interruption

import (
	"errors"
	"fmt"
	"time"
)

// Source says which signal announced an interruption.
type Source string

const (
	// SourceNodeCondition is the node's own notice (PreemptionScheduled).
	SourceNodeCondition Source = "NodeCondition"
	// SourceEventGrid is Azure Resource Notifications through Event Grid.
	SourceEventGrid Source = "EventGrid"
)

// Event Grid delivery schemas (the event subscription's eventDeliverySchema).
const (
	SchemaEventGrid   = "EventGridSchema"
	SchemaCloudEvents = "CloudEventSchemaV1_0"
)

// DefaultNotice is the notice assumed when a node condition carries no
// deadline that can be read: Azure gives spot VMs at least 30 s.
const DefaultNotice = 30 * time.Second

// Signal is one parsed interruption notice.
type Signal struct {
	Source Source
	// Schema is the Event Grid delivery schema (SchemaEventGrid or
	// SchemaCloudEvents); empty for a node condition.
	Schema string
	// EventID identifies the notice: the Event Grid event id, or the
	// Scheduled Event's EventId from the condition message.
	EventID string
	// Node names the Node (node condition); ProviderID the VM
	// ("azure://" + its ARM resource ID). At least one is set.
	Node       string
	ProviderID string
	// Deadline is when the VM is gone.
	Deadline time.Time
	// DeadlineAssumed: the notice carried no readable deadline, so
	// Deadline is the arrival time plus the default notice.
	DeadlineAssumed bool
	// Gone: the VM is already gone (Event Grid reports after the fact).
	Gone bool
	// Detail is a human-readable description for events and conditions.
	Detail string
	// DeliveryCount is Event Grid's aeg-delivery-count (0 when absent).
	DeliveryCount int
}

// Target names what the signal is about, for logs.
func (s Signal) Target() string {
	switch {
	case s.Node != "" && s.ProviderID != "":
		return fmt.Sprintf("node %s (%s)", s.Node, s.ProviderID)
	case s.Node != "":
		return "node " + s.Node
	}
	return "VM " + s.ProviderID
}

// IgnoredError means a well-formed message that is not an interruption of
// one of our VMs (another event type, an annotation that does not mean the
// VM is going away, a scale-set VM, a rebalance advisory). The message is
// acknowledged and the reason logged: retrying would change nothing, and it
// is not broken, so it does not belong in the dead-letter queue.
type IgnoredError struct{ Reason string }

func (e *IgnoredError) Error() string { return "not an interruption: " + e.Reason }

// NewIgnoredError formats an IgnoredError.
func NewIgnoredError(format string, args ...any) error {
	return &IgnoredError{Reason: fmt.Sprintf(format, args...)}
}

// IsIgnored reports whether err is, or wraps, an IgnoredError.
func IsIgnored(err error) bool {
	var ignored *IgnoredError
	return errors.As(err, &ignored)
}
