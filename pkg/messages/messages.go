// Package messages defines the CloudEvents karpfunc's parts exchange: what the
// relay publishes and the Functions consume. Messages are triggers, not state:
// every consumer re-reads the authoritative objects from the API server, so a
// payload carries only references and hints.
package messages

import (
	"encoding/json"
	"fmt"
	"time"
)

// SpecVersion is the CloudEvents version karpfunc writes.
const SpecVersion = "1.0"

// ContentType is the structured-mode CloudEvents media type.
const ContentType = "application/cloudevents+json"

// Event types.
const (
	// TypeProvision asks the Provision function to place pending pods.
	TypeProvision = "com.karpfunc.provision.v1"
	// TypeNode reports a Node that joined or changed readiness.
	TypeNode = "com.karpfunc.node.v1"
	// TypeNodeClaimDeleting reports a NodeClaim that has a deletion timestamp.
	TypeNodeClaimDeleting = "com.karpfunc.nodeclaim.deleting.v1"
	// TypeNodeClaimLiveness is a scheduled check that a launched NodeClaim
	// registered in time.
	TypeNodeClaimLiveness = "com.karpfunc.nodeclaim.liveness.v1"
	// TypeInterruption reports a node whose VM Azure is about to preempt
	// (its PreemptionScheduled condition turned True).
	TypeInterruption = "com.karpfunc.interruption.v1"
	// TypeNodeClaimLaunch is a scheduled look at a NodeClaim whose VM is
	// being created: did the create finish, fail, or is it still running?
	TypeNodeClaimLaunch = "com.karpfunc.nodeclaim.launch.v1"
	// TypeDisruption asks the Disruption function for a pass: something
	// that can change its answer happened (pods left a node, a NodeClaim
	// initialized, a NodePool or AKSNodeClass changed, a deadline came).
	TypeDisruption = "com.karpfunc.disruption.v1"
	// TypeDisruptionValidate is the re-check of a decided command after
	// the validation delay (Karpenter's 15 s).
	TypeDisruptionValidate = "com.karpfunc.disruption.validate.v1"
	// TypeNodeRepair is a scheduled look at an unhealthy node when its
	// repair policy's toleration ends (data: Node).
	TypeNodeRepair = "com.karpfunc.node.repair.v1"
)

// CloudEvent is a CloudEvents 1.0 event in structured JSON mode.
type CloudEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject,omitempty"`
	Time            time.Time       `json:"time,omitzero"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
}

// ObjectRef names a namespaced or cluster-scoped object at a version.
type ObjectRef struct {
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Provision is the data of TypeProvision: the pods kube-scheduler marked
// Unschedulable in one batch window.
type Provision struct {
	Cluster string      `json:"cluster"`
	Pods    []ObjectRef `json:"pods"`
}

// Node is the data of TypeNode and TypeNodeRepair.
type Node struct {
	Cluster    string `json:"cluster"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
	Ready      bool   `json:"ready"`
}

// NodeClaim is the data of TypeNodeClaimDeleting, TypeNodeClaimLiveness and
// TypeNodeClaimLaunch.
type NodeClaim struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
	UID     string `json:"uid,omitempty"`
}

// Interruption is the data of TypeInterruption: the node and its
// PreemptionScheduled condition as the relay saw it. The Interruption
// function re-reads the Node when it still exists.
type Interruption struct {
	Cluster    string    `json:"cluster"`
	Node       string    `json:"node"`
	UID        string    `json:"uid,omitempty"`
	ProviderID string    `json:"providerID,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	Since      time.Time `json:"since,omitzero"`
}

// Disruption is the data of TypeDisruption; Cause is for the log.
type Disruption struct {
	Cluster string `json:"cluster"`
	Cause   string `json:"cause,omitempty"`
	// Nodes had pod events (a pod bound, deleted or finished) up to
	// PodEventTime: their NodeClaims' status.lastPodEventTime moves there,
	// which restarts consolidateAfter.
	Nodes        []string  `json:"nodes,omitempty"`
	PodEventTime time.Time `json:"podEventTime,omitzero"`
}

// DisruptionCommand is the data of TypeDisruptionValidate: a command as it
// was decided, to be re-checked on a fresh snapshot.
type DisruptionCommand struct {
	Cluster string `json:"cluster"`
	Method  string `json:"method"`
	Reason  string `json:"reason"`
	// Candidates are the NodeClaims to disrupt, with their UIDs.
	Candidates []ObjectRef `json:"candidates"`
	// Replacements are the instance-type options of each replacement (none:
	// delete).
	Replacements [][]string `json:"replacements,omitempty"`
	// SavingsPerHour is what the command was decided to save; validation
	// refuses a rebalance that would now save less.
	SavingsPerHour float64   `json:"savingsPerHour,omitempty"`
	DecidedAt      time.Time `json:"decidedAt,omitzero"`
}

// New builds a CloudEvent of type typ carrying data.
func New(id, source, typ, subject string, now time.Time, data any) (CloudEvent, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return CloudEvent{}, fmt.Errorf("encoding %s data: %w", typ, err)
	}
	return CloudEvent{SpecVersion: SpecVersion, ID: id, Source: source, Type: typ, Subject: subject,
		Time: now.UTC(), DataContentType: "application/json", Data: raw}, nil
}

// Decode parses a structured-mode CloudEvent and checks the fields every
// consumer relies on, so a malformed message fails with a reason that says
// what is wrong instead of a zero value travelling on.
func Decode(body []byte) (CloudEvent, error) {
	var ev CloudEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return CloudEvent{}, NewInvalidError("message body is not a JSON CloudEvent: %v", err)
	}
	switch {
	case ev.SpecVersion != SpecVersion:
		return ev, NewInvalidError("specversion is %q; want %q", ev.SpecVersion, SpecVersion)
	case ev.ID == "":
		return ev, NewInvalidError("CloudEvent has no id")
	case ev.Type == "":
		return ev, NewInvalidError("CloudEvent %s has no type", ev.ID)
	}
	return ev, nil
}

// DecodeData unmarshals ev.Data into a T and checks its required fields.
// Fields it does not know are ignored, so a relay and a handler one version
// apart keep working through a rolling upgrade (a newer producer may add
// fields); a missing required field or a value of the wrong JSON type is an
// InvalidError. Unknown event types are the consumer's to refuse (it
// switches on ev.Type).
func DecodeData[T any](ev CloudEvent) (T, error) {
	var out T
	if len(ev.Data) == 0 {
		return out, NewInvalidError("CloudEvent %s (%s) has no data", ev.ID, ev.Type)
	}
	if err := json.Unmarshal(ev.Data, &out); err != nil {
		return out, NewInvalidError("CloudEvent %s (%s) data: %v", ev.ID, ev.Type, err)
	}
	if validator, ok := any(&out).(interface{ validate() error }); ok {
		if err := validator.validate(); err != nil {
			return out, NewInvalidError("CloudEvent %s (%s) data: %v", ev.ID, ev.Type, err)
		}
	}
	return out, nil
}

// required names the first empty required field.
func required(fields ...[2]string) error {
	for _, field := range fields {
		if field[1] == "" {
			return fmt.Errorf("required field %q is missing or empty", field[0])
		}
	}
	return nil
}

func (p *Provision) validate() error {
	if err := required([2]string{"cluster", p.Cluster}); err != nil {
		return err
	}
	for i, pod := range p.Pods {
		if pod.Name == "" {
			return fmt.Errorf("pods[%d]: required field \"name\" is missing or empty", i)
		}
	}
	return nil
}

func (n *Node) validate() error {
	return required([2]string{"cluster", n.Cluster}, [2]string{"name", n.Name})
}

func (d *Disruption) validate() error { return required([2]string{"cluster", d.Cluster}) }

func (d *DisruptionCommand) validate() error {
	if err := required([2]string{"cluster", d.Cluster}, [2]string{"method", d.Method}, [2]string{"reason", d.Reason}); err != nil {
		return err
	}
	if len(d.Candidates) == 0 {
		return fmt.Errorf("required field %q is empty", "candidates")
	}
	for i, candidate := range d.Candidates {
		if candidate.Name == "" || candidate.UID == "" {
			return fmt.Errorf("candidates[%d]: name and uid are required", i)
		}
	}
	return nil
}

func (n *NodeClaim) validate() error {
	return required([2]string{"cluster", n.Cluster}, [2]string{"name", n.Name})
}
