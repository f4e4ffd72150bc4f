package interruption

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// aeg are the application properties Event Grid sets on a Service Bus
// delivery.
func aeg(metadataVersion string) map[string]any {
	return map[string]any{
		PropEventType: AEGNotification, PropSubscriptionName: "KARPFUNC-INTERRUPTION", PropDeliveryCount: "0",
		PropMetadataVersion: metadataVersion, PropDataVersion: "1", PropOutputEventID: "8945cf9b-e220-496e-ab4f-f3a239318995",
	}
}

func TestParseEventGrid(t *testing.T) {
	const vm = "azure:///subscriptions/00000000-0000-0000-0000-00000000c0de/resourceGroups/MC_karpfunc_local_eastus/providers/Microsoft.Compute/virtualMachines/spot-abc"
	occurred := time.Date(2026, 12, 1, 10, 20, 37, 924507100, time.UTC)
	preempted := string(testdata(t, "preempted-eventgrid.json"))
	cases := []struct {
		name    string
		body    string
		props   map[string]any
		schema  string
		ignored string // substring of the IgnoredError
		invalid string // substring of the InvalidError
	}{
		{name: "Event Grid schema", body: preempted, props: aeg("1"), schema: SchemaEventGrid},
		{name: "CloudEvents 1.0", body: string(testdata(t, "preempted-cloudevent.json")), props: aeg("0"), schema: SchemaCloudEvents},
		{name: "one-element array", body: "[" + preempted + "]", props: aeg("1"), schema: SchemaEventGrid},
		{name: "no aeg properties", body: preempted, schema: SchemaEventGrid},
		{name: "another annotation", body: string(testdata(t, "deallocation-eventgrid.json")), props: aeg("1"), ignored: "does not mean the VM is going away"},
		{name: "another event type", body: string(testdata(t, "availability-cloudevent.json")), props: aeg("0"), ignored: "AvailabilityStatusChanged"},
		{name: "scale-set VM", body: strings.Replace(preempted, `"targetResourceType": "Microsoft.Compute/virtualMachines"`, `"targetResourceType": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"`, 1),
			props: aeg("1"), ignored: "not a standalone VM"},
		{name: "validation handshake", body: preempted, props: map[string]any{PropEventType: "SubscriptionValidation"}, ignored: "SubscriptionValidation"},
		{name: "malformed JSON", body: `{"eventType": "Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated", "data": {`, props: aeg("1"), invalid: "not a JSON object"},
		{name: "not an event", body: `{"hello": "world"}`, props: aeg("1"), invalid: "neither"},
		{name: "two events", body: "[" + preempted + "," + preempted + "]", props: aeg("1"), invalid: "holds 2 events"},
		{name: "no data", body: `{"id":"x","eventType":"Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated","subject":"s","dataVersion":"1","eventTime":"2026-12-01T10:20:37Z"}`,
			props: aeg("1"), invalid: "has no data"},
		{name: "no target", body: strings.Replace(preempted, `"targetResourceId"`, `"somethingElse"`, 1), props: aeg("1"), invalid: "targetResourceId"},
		{name: "CloudEvent without source", body: strings.Replace(string(testdata(t, "preempted-cloudevent.json")), `"source"`, `"origin"`, 1), props: aeg("0"), invalid: "CloudEvent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sig, err := ParseEventGrid([]byte(c.body), c.props)
			switch {
			case c.ignored != "":
				if !IsIgnored(err) || !strings.Contains(err.Error(), c.ignored) {
					t.Fatalf("err = %v; want an IgnoredError containing %q", err, c.ignored)
				}
				return
			case c.invalid != "":
				if !messages.IsInvalid(err) || !strings.Contains(err.Error(), c.invalid) {
					t.Fatalf("err = %v; want an InvalidError containing %q", err, c.invalid)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if sig.ProviderID != vm || !sig.Gone || !sig.Deadline.Equal(occurred) || sig.Schema != c.schema ||
				sig.Source != SourceEventGrid || sig.EventID != "8945cf9b-e220-496e-ab4f-f3a239318995" {
				t.Errorf("signal = %+v", sig)
			}
			if !IsEventGrid([]byte(c.body), c.props) {
				t.Error("IsEventGrid = false")
			}
		})
	}
}

func TestIsEventGridRelayEvent(t *testing.T) {
	ev, err := messages.New("node/u/preemption/1", "/karpfunc/relay/local", messages.TypeInterruption, "n1", time.Now(), messages.Interruption{Cluster: "c", Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"specversion":"1.0","id":"` + ev.ID + `","source":"` + ev.Source + `","type":"` + ev.Type + `","data":` + string(ev.Data) + `}`)
	if IsEventGrid(body, map[string]any{"type": messages.TypeInterruption, "cluster": "c"}) {
		t.Error("the relay's own event was taken for an Event Grid delivery")
	}
}

func TestParseNodeCondition(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cond := func(status corev1.ConditionStatus, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: ConditionPreemptionScheduled, Status: status, Reason: ReasonSpotEvictionIncoming, Message: msg}
	}
	cases := []struct {
		name     string
		cond     corev1.NodeCondition
		deadline time.Time
		assumed  bool
		eventID  string
		ignored  bool
	}{
		{name: "scheduled", cond: cond(corev1.ConditionTrue, "Preempt Scheduled: Tue, 01 Dec 2026 10:00:30 GMT. For more information, see https://aka.ms/scheduledevents. EventId: 40b7bd88-c56e-44e4-93f6-75cedace2869"),
			deadline: now.Add(30 * time.Second), eventID: "40B7BD88-C56E-44E4-93F6-75CEDACE2869"},
		{name: "single-digit day", cond: cond(corev1.ConditionTrue, "Preempt Scheduled: Tue, 1 Dec 2026 10:00:45 GMT."), deadline: now.Add(45 * time.Second)},
		{name: "irregular spaces", cond: cond(corev1.ConditionTrue, "Preempt  Scheduled:   Tue, 01 Dec 2026   10:00:30 UTC"), deadline: now.Add(30 * time.Second)},
		{name: "started", cond: cond(corev1.ConditionTrue, "Preempt Started. EventId: 40B7BD88-C56E-44E4-93F6-75CEDACE2869"), deadline: now, eventID: "40B7BD88-C56E-44E4-93F6-75CEDACE2869"},
		{name: "no deadline", cond: cond(corev1.ConditionTrue, "Preempt Scheduled. For more information, see https://aka.ms/scheduledevents"), deadline: now.Add(DefaultNotice), assumed: true},
		{name: "unparseable deadline", cond: cond(corev1.ConditionTrue, "Preempt Scheduled: next tuesday GMT."), deadline: now.Add(DefaultNotice), assumed: true},
		{name: "non-UTC zone", cond: cond(corev1.ConditionTrue, "Preempt Scheduled: Tue, 01 Dec 2026 02:00:30 PST."), deadline: now.Add(DefaultNotice), assumed: true},
		{name: "empty message", cond: cond(corev1.ConditionTrue, ""), deadline: now.Add(DefaultNotice), assumed: true},
		{name: "unknown message", cond: cond(corev1.ConditionTrue, "Something new from NPD"), deadline: now.Add(DefaultNotice), assumed: true},
		{name: "advisory", cond: cond(corev1.ConditionTrue, "SpotRebalanceRecommendation Advisory. For more information, see https://aka.ms/x"), ignored: true},
		{name: "condition false", cond: cond(corev1.ConditionFalse, "no scheduled events"), ignored: true},
		{name: "other condition", cond: corev1.NodeCondition{Type: "VMEventScheduled", Status: corev1.ConditionTrue, Message: "Reboot Scheduled: Tue, 01 Dec 2026 10:10:00 GMT."}, ignored: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sig, err := ParseNodeCondition("aks-spot-1", "azure:///x", c.cond, now, 0)
			if c.ignored {
				if !IsIgnored(err) {
					t.Fatalf("err = %v; want IgnoredError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sig.Deadline.Equal(c.deadline) || sig.DeadlineAssumed != c.assumed || sig.EventID != c.eventID || sig.Node != "aks-spot-1" || sig.Gone {
				t.Errorf("signal = %+v; want deadline %s assumed=%t eventID %q", sig, c.deadline, c.assumed, c.eventID)
			}
		})
	}
}
