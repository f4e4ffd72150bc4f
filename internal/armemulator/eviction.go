package armemulator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/messaging"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azsystemevents"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// A spot eviction plays out as Azure's does, in order:
//
//  1. the node's own notice: the condition PreemptionScheduled=True that
//     AKS's node-problem-detector sets from the VM's Scheduled Events
//     (Preempt, NotBefore = the deadline), reason SpotEvictionIncoming;
//  2. the notice (Options.EvictionNotice, default 30 s): the VM still runs;
//  3. the VM (eviction policy Delete: with its NICs whose deleteOption says
//     so) and its Node disappear;
//  4. Event Grid delivers Azure Resource Notifications' ResourceAnnotated
//     event with annotation VirtualMachinePreempted to the interruption
//     queue, in the subscription's schema, with the aeg-* application
//     properties Event Grid sets on Service Bus messages.
//
// A VM deleted by its owner during the notice is not preempted: no
// annotation follows.

// DefaultEvictionNotice is the notice Azure gives a spot VM (at least 30 s).
const DefaultEvictionNotice = 30 * time.Second

// Event Grid delivery schemas.
const (
	SchemaEventGrid   = "EventGridSchema"
	SchemaCloudEvents = "CloudEventSchemaV1_0"
)

// EventGrid is where the emulator delivers health-resources events, as an
// Event Grid system topic subscription with a Service Bus queue endpoint.
type EventGrid struct {
	Publisher bus.Publisher
	Queue     string
	// Schema is SchemaEventGrid (default) or SchemaCloudEvents.
	Schema string
	// Subscription is the event subscription's name (aeg-subscription-name).
	Subscription string
}

// EvictOptions shape one eviction.
type EvictOptions struct {
	// Notice overrides Options.EvictionNotice; negative: none, the VM goes
	// at once.
	Notice time.Duration
	// NoNodeCondition: node-problem-detector misses the notice (or the VM
	// gets none), so only Event Grid reports the eviction, after the fact.
	NoNodeCondition bool
	// Schema overrides the Event Grid delivery schema for this eviction.
	Schema string
}

type eviction struct {
	at      time.Time
	eventID string
	schema  string
}

// SetEventGrid sets (or, with a nil Publisher, removes) the Event Grid
// delivery of preemption annotations.
func (s *Server) SetEventGrid(eg EventGrid) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventGrid = eg
}

// Evict starts a spot eviction of VM name with the configured notice (see
// the sequence above) and returns once the node condition is queued.
func (s *Server) Evict(name string) error { return s.EvictWith(name, EvictOptions{}) }

// EvictWith starts a spot eviction of VM name.
func (s *Server) EvictWith(name string, opts EvictOptions) error {
	s.mu.Lock()
	s.settleLocked()
	var vmRecord *vmState
	for _, cand := range s.vms {
		if strings.EqualFold(cand.name(), name) {
			vmRecord = cand
			break
		}
	}
	if vmRecord == nil {
		s.mu.Unlock()
		return fmt.Errorf("armemulator: no VM %q", name)
	}
	if deref(vmRecord.vm.Properties.Priority) != armcompute.VirtualMachinePriorityTypesSpot {
		s.mu.Unlock()
		return fmt.Errorf("armemulator: VM %q is not a spot VM", name)
	}
	if vmRecord.eviction != nil {
		s.mu.Unlock()
		return fmt.Errorf("armemulator: VM %q is already being evicted", name)
	}
	notice := s.opts.EvictionNotice
	if opts.Notice != 0 {
		notice = opts.Notice
	}
	switch {
	case notice == 0:
		notice = DefaultEvictionNotice
	case notice < 0:
		notice = 0
	}
	now := s.clock.Now()
	ev := &eviction{at: now.Add(notice), eventID: newUUID(), schema: opts.Schema}
	vmRecord.eviction = ev
	s.counters.Evictions++
	node := nodeName(vmRecord)
	booted := vmRecord.booted
	s.mu.Unlock()
	if booted && !opts.NoNodeCondition && s.nodes != nil {
		s.nodes.condition(node, corev1.NodeCondition{
			Type: "PreemptionScheduled", Status: corev1.ConditionTrue, Reason: "SpotEvictionIncoming",
			Message: fmt.Sprintf("Preempt Scheduled: %s. For more information, see https://aka.ms/scheduledevents. EventId: %s",
				ev.at.UTC().Format(time.RFC1123), strings.ToUpper(ev.eventID)),
			LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
		})
	}
	s.log.Info("spot eviction scheduled", "vm", name, "deadline", ev.at.UTC().Format(time.RFC3339), "nodeCondition", booted && !opts.NoNodeCondition)
	s.mu.Lock()
	s.settleLocked() // a notice of 0 evicts now
	s.mu.Unlock()
	return nil
}

// evictLocked removes a VM whose notice ran out and queues the Event Grid
// delivery, which waits for the Node to be gone (the order Azure's signals
// arrive in).
func (s *Server) evictLocked(key string, v *vmState) {
	ev := v.eviction
	id := deref(v.vm.ID)
	node := nodeName(v)
	s.removeVMLocked(key, v)
	s.counters.Preempted++
	eg := s.eventGrid
	if ev.schema != "" {
		eg.Schema = ev.schema
	}
	occurred := s.clock.Now()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.waitNodeGone(node)
		if s.opts.OnEviction != nil {
			s.opts.OnEviction(id)
		}
		if eg.Publisher == nil {
			return
		}
		msg, err := PreemptedMessage(eg, ev.eventID, id, occurred)
		if err != nil {
			s.log.Error("building the Event Grid message", "vm", id, "error", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eg.Publisher.Publish(ctx, eg.Queue, msg); err != nil {
			s.log.Error("delivering the Event Grid message", "vm", id, "queue", eg.Queue, "error", err)
			return
		}
		s.log.Info("Event Grid delivered VirtualMachinePreempted", "vm", id, "schema", eg.Schema, "queue", eg.Queue)
	}()
}

// waitNodeGone waits (bounded) until the Node of an evicted VM is deleted.
func (s *Server) waitNodeGone(name string) {
	if s.nodes == nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.nodes.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PreemptedMessage is the Service Bus message Event Grid delivers for a
// VirtualMachinePreempted annotation on VM vmID, built with the Event Grid
// SDK's own types, in eg's schema and with its aeg-* properties.
func PreemptedMessage(eg EventGrid, eventID, vmID string, occurred time.Time) (bus.Message, error) {
	sub := strings.Split(strings.TrimPrefix(vmID, "/"), "/")
	topic := "/"
	if len(sub) >= 2 {
		topic = "/subscriptions/" + sub[1]
	}
	occurred = occurred.UTC()
	apiVersion := "2022-08-01"
	typ := azsystemevents.TypeResourceNotificationsHealthResourcesAnnotated
	data := azsystemevents.ResourceNotificationsHealthResourcesAnnotatedEventData{
		APIVersion:         &apiVersion,
		OperationalDetails: &azsystemevents.ResourceNotificationsOperationalDetails{ResourceEventTime: &occurred},
		ResourceDetails: &azsystemevents.ResourceNotificationsResourceUpdatedDetails{
			ID:   ptr(vmID + "/providers/Microsoft.ResourceHealth/resourceAnnotations/" + eventID),
			Name: ptr(eventID),
			Type: ptr("Microsoft.ResourceHealth/resourceAnnotations"),
			Properties: map[string]any{
				"targetResourceId":   vmID,
				"targetResourceType": "Microsoft.Compute/virtualMachines",
				"occurredTime":       occurred.Format(time.RFC3339Nano),
				"annotationName":     "VirtualMachinePreempted",
				"reason":             "Spot Virtual Machine preempted",
				"summary":            "This Spot virtual machine has been preempted due to capacity recall by the platform.",
				"context":            "Platform Initiated",
				"category":           "Unplanned",
			},
		},
	}
	rawData, err := json.Marshal(data)
	if err != nil {
		return bus.Message{}, err
	}
	subscription := eg.Subscription
	if subscription == "" {
		subscription = "karpfunc-interruption"
	}
	props := map[string]any{
		"aeg-subscription-name": strings.ToUpper(subscription),
		"aeg-delivery-count":    "0",
		"aeg-event-type":        "Notification",
		"aeg-output-event-id":   eventID,
	}
	var body []byte
	contentType := "application/json"
	switch eg.Schema {
	case "", SchemaEventGrid:
		body, err = json.Marshal(azsystemevents.EventGridEvent{
			ID: &eventID, Topic: &topic, Subject: &vmID, EventType: &typ, EventTime: &occurred,
			DataVersion: ptr("1"), MetadataVersion: ptr("1"), Data: json.RawMessage(rawData),
		})
		props["aeg-metadata-version"] = "1"
		props["aeg-data-version"] = "1"
	case SchemaCloudEvents:
		ce, cerr := messaging.NewCloudEvent(topic, typ, json.RawMessage(rawData), &messaging.CloudEventOptions{Subject: &vmID, Time: &occurred})
		if cerr != nil {
			return bus.Message{}, cerr
		}
		ce.ID = eventID
		body, err = json.Marshal(ce)
		props["aeg-metadata-version"] = "1"
		contentType = "application/cloudevents+json; charset=utf-8"
	default:
		return bus.Message{}, fmt.Errorf("armemulator: unknown Event Grid delivery schema %q; want %s or %s", eg.Schema, SchemaEventGrid, SchemaCloudEvents)
	}
	if err != nil {
		return bus.Message{}, err
	}
	return bus.Message{ID: eventID, ContentType: contentType, Body: body, ApplicationProperties: props}, nil
}

// condition sets (adds or replaces by type) a condition on a Node's status,
// as AKS's node-problem-detector does on the node, retrying while the API
// server is unavailable; a Node that is gone ends it.
func (nw *nodeWorker) condition(name string, c corev1.NodeCondition) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		nw.log.Error("node condition not encoded", "node", name, "error", err)
		return
	}
	nw.wg.Add(1)
	go func() {
		defer nw.wg.Done()
		for attempt := 1; attempt <= maxNodeAttempts; attempt++ {
			ctx, cancel := context.WithTimeout(nw.ctx, 10*time.Second)
			// Conditions merge by type in a strategic merge patch.
			_, err := nw.admin.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			cancel()
			switch {
			case err == nil:
				nw.log.Info("node condition set", "node", name, "type", c.Type, "status", c.Status)
				return
			case apierrors.IsNotFound(err), nw.ctx.Err() != nil:
				return // the VM went first, or the emulator stops
			}
			select {
			case <-nw.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}
