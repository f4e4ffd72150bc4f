package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/localbus"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// testDeps are the adapter's dependencies in a test: any of them nil.
type testDeps struct {
	pub  bus.Publisher
	kube client.Client
	rec  *events.Recorder
}

func (d testDeps) publisher() bus.Publisher        { return d.pub }
func (d testDeps) kubeClient() client.Client       { return d.kube }
func (d testDeps) eventRecorder() *events.Recorder { return d.rec }

// invocation is a Service Bus trigger's invocation carrying ev.
func invocation(t *testing.T, ev messages.CloudEvent) *customhandler.Invocation {
	t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &customhandler.Invocation{Data: map[string]json.RawMessage{"msg": body},
		Metadata: customhandler.Metadata{MessageID: ev.ID, DeliveryCount: 2}}
}

func event(t *testing.T, id, typ string, data any) messages.CloudEvent {
	t.Helper()
	ev, err := messages.New(id, "test", typ, "", time.Now(), data)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// Every function folder has its table, and every message kind pkg/triggers
// builds is routed to a handler: a message no table names would be
// dead-lettered as unknown.
func TestFunctionTable(t *testing.T) {
	want := map[string][]string{
		"Provision":    {messages.TypeProvision},
		"Lifecycle":    {messages.TypeNode, messages.TypeNodeClaimDeleting, messages.TypeNodeClaimLaunch, messages.TypeNodeClaimLiveness, messages.TypeNodeRepair},
		"Sweep":        {typeTimer},
		"Interruption": {messages.TypeInterruption, typeEventGrid},
		"Disruption":   {messages.TypeDisruption, messages.TypeDisruptionValidate},
	}
	routed := map[string]string{} // type -> function
	d := &dependencies{}
	for _, fn := range d.functions() {
		if _, err := os.Stat(filepath.Join(fn.name, "function.json")); err != nil {
			t.Errorf("function %s has no folder with a function.json: %v", fn.name, err)
		}
		types := strings.Split(fn.types(), ", ")
		slices.Sort(want[fn.name])
		if !slices.Equal(types, want[fn.name]) {
			t.Errorf("%s routes %v; want %v", fn.name, types, want[fn.name])
		}
		for typ, rt := range fn.routes {
			routed[typ] = fn.name
			if rt.handle == nil {
				t.Errorf("%s: type %s has no handler", fn.name, typ)
			}
		}
		delete(want, fn.name)
	}
	if len(want) != 0 {
		t.Errorf("functions without a table: %v", want)
	}
	now := time.Now()
	for _, cont := range []triggers.Continuation{
		triggers.ProvisionPass("c", "", now, time.Second), triggers.NodeClaimDeleting("c", "nc", "u", now),
		triggers.Liveness("c", "nc", "u", now), triggers.LaunchCheck("c", "nc", "u", now), triggers.DisruptionPass("c", "x", now),
		triggers.DisruptionValidate(messages.DisruptionCommand{Cluster: "c", Method: "m"}, "id", now, time.Second),
		triggers.RepairCheck(messages.Node{Cluster: "c", Name: "n", UID: "u"}, now),
	} {
		if routed[cont.Type()] == "" {
			t.Errorf("continuation %s of type %s has no handler", cont, cont.Type())
		}
	}
}

// The adapter dispatches by type; a type the function does not handle is
// refused as invalid (dead-lettered with the reason), naming what it
// handles, and reaches no handler.
func TestAdapterDispatch(t *testing.T) {
	var got []string
	record := func(name string) handler {
		return func(_ context.Context, c *call) (triggers.Outcome, error) {
			got = append(got, name+":"+c.ev.ID)
			return triggers.Outcome{}, nil
		}
	}
	fn := function{name: "Test", decode: decodeEvent, routes: map[string]route{
		"com.example.a": {handle: record("a")}, "com.example.b": {handle: record("b")},
	}}
	run := adapt(fn, testDeps{})
	log := customhandler.NewLogger(&bytes.Buffer{}, "")
	for _, ev := range []messages.CloudEvent{event(t, "1", "com.example.b", map[string]string{}), event(t, "2", "com.example.a", map[string]string{})} {
		if err := run(context.Background(), invocation(t, ev), log); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []string{"b:1", "a:2"}) {
		t.Errorf("handled %v; want [b:1 a:2]", got)
	}
	err := run(context.Background(), invocation(t, event(t, "3", "com.example.unknown", map[string]string{})), log)
	if !messages.IsInvalid(err) || !strings.Contains(err.Error(), `Test got CloudEvent 3 of unknown type "com.example.unknown"; it handles com.example.a, com.example.b`) {
		t.Errorf("unknown type: %v; want an InvalidError naming the handled types", err)
	}
	if len(got) != 2 {
		t.Errorf("the unknown type reached a handler: %v", got)
	}
	garbled := &customhandler.Invocation{Data: map[string]json.RawMessage{"msg": json.RawMessage(`"not json"`)}}
	if err := run(context.Background(), garbled, log); !messages.IsInvalid(err) {
		t.Errorf("undecodable body: %v; want an InvalidError", err)
	}
}

// The adapter sends the outcome's continuations under the constructors'
// IDs, also when the handler failed after deciding them; continuations
// with no publisher to send them are an error, never dropped.
func TestAdapterPublishesContinuations(t *testing.T) {
	lb := localbus.New(localbus.Options{})
	if err := lb.CreateQueue(bus.QueueLifecycle, localbus.QueueOptions{RequiresDuplicateDetection: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	next := triggers.TerminateRetry("c", "nc", "u1", now.Add(-time.Minute), time.Millisecond)
	failing := errors.New("ARM busy")
	var fail bool
	fn := function{name: "Test", decode: decodeEvent, routes: map[string]route{
		messages.TypeNodeClaimDeleting: {handle: func(context.Context, *call) (triggers.Outcome, error) {
			out := triggers.Wait(errors.New("a PDB blocks the eviction"), next)
			if fail {
				return out, failing
			}
			return out, nil
		}},
	}}
	var logged bytes.Buffer
	log := customhandler.NewLogger(&logged, "")
	ev := event(t, "nodeclaim/u1/deleting", messages.TypeNodeClaimDeleting, messages.NodeClaim{Cluster: "c", Name: "nc", UID: "u1"})
	if err := adapt(fn, testDeps{pub: lb})(context.Background(), invocation(t, ev), log); err != nil {
		t.Fatalf("waiting is not failing: %v", err)
	}
	if want := "waiting: a PDB blocks the eviction; then lifecycle " + next.ID(); !strings.Contains(strings.Join(log.Lines(), "\n"), want) {
		t.Errorf("log %q; want the outcome %q", log.Lines(), want)
	}
	receive := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d, err := lb.Receive(ctx, bus.QueueLifecycle)
		if err != nil {
			t.Fatalf("no continuation arrived: %v", err)
		}
		if err := lb.Complete(d); err != nil {
			t.Fatal(err)
		}
		return d.Message.ID
	}
	if id := receive(); id != next.ID() {
		t.Errorf("continuation %s; want the constructor's %s", id, next.ID())
	}

	fail = true
	next = triggers.TerminateRetry("c", "nc", "u1", now.Add(-time.Hour), time.Millisecond)
	if err := adapt(fn, testDeps{pub: lb})(context.Background(), invocation(t, ev), log); !errors.Is(err, failing) {
		t.Errorf("error %v; want the handler's", err)
	}
	if id := receive(); id != next.ID() {
		t.Errorf("continuation after a failure %s; want %s", id, next.ID())
	}

	fail = false
	if err := adapt(fn, testDeps{})(context.Background(), invocation(t, ev), log); err == nil || !strings.Contains(err.Error(), "no Service Bus publisher") {
		t.Errorf("continuations without a publisher: %v; want an error", err)
	}
}

// A failure is written as a Warning event on the objects the message is
// about (the route's subjects and those the handler names), for any
// function, where kubectl describe shows it.
func TestAdapterReportsFailure(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := context.Background()
	for _, name := range []string{"named-by-event", "named-by-handler"} {
		if err := kube.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	fn := function{name: "Interruption", decode: decodeEvent, routes: map[string]route{
		messages.TypeInterruption: {subjects: interruptionSubject, handle: func(_ context.Context, c *call) (triggers.Outcome, error) {
			c.about(nodeNamed("named-by-handler"), nodeNamed("gone"))
			return triggers.Outcome{}, errors.New("ARM said AuthorizationFailed")
		}},
	}}
	deps := testDeps{kube: kube, rec: events.NewRecorder(kube, clock.RealClock{})}
	ev := event(t, "m-1", messages.TypeInterruption, messages.Interruption{Cluster: "c", Node: "named-by-event"})
	if err := adapt(fn, deps)(ctx, invocation(t, ev), customhandler.NewLogger(&bytes.Buffer{}, "")); err == nil {
		t.Fatal("the failure was not returned")
	}
	var list corev1.EventList
	if err := kube.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	warned := map[string]string{}
	for _, e := range list.Items {
		if e.Reason == events.ReasonHandlerFailed && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "Node" {
			warned[e.InvolvedObject.Name] = e.Message
		}
	}
	for _, name := range []string{"named-by-event", "named-by-handler"} {
		msg := warned[name]
		if !strings.Contains(msg, "karpfunc Interruption failed (delivery 2 of message m-1)") || !strings.Contains(msg, "AuthorizationFailed") {
			t.Errorf("event on node %s: %q; want the failure", name, msg)
		}
	}
	if len(warned) != 2 {
		t.Errorf("warned %v; want the two nodes that exist", warned)
	}
}

// Waiting is not failing: a drain blocked by a PDB, a VM delete under way
// and ARM throttling are waits with a delay; anything else is a failure.
func TestTerminateRetryAfter(t *testing.T) {
	const drainRetry = 10 * time.Second
	for _, tc := range []struct {
		name    string
		err     error
		want    time.Duration
		waiting bool
	}{
		{"VM delete under way", &lifecycle.InstanceDeletePendingError{NodeClaim: "nc", RetryAfter: 3 * time.Second}, 3 * time.Second, true},
		{"VM delete with no delay named", &lifecycle.InstanceDeletePendingError{NodeClaim: "nc"}, drainRetry, true},
		{"wrapped", fmt.Errorf("terminating: %w", &lifecycle.InstanceDeletePendingError{RetryAfter: time.Second}), time.Second, true},
		{"a failure", errors.New("AuthorizationFailed"), 0, false},
	} {
		after, waiting := terminateRetryAfter(tc.err, drainRetry)
		if after != tc.want || waiting != tc.waiting {
			t.Errorf("%s: %s, waiting=%t; want %s, %t", tc.name, after, waiting, tc.want, tc.waiting)
		}
	}
}

// A Lifecycle message that names no object is invalid (dead-lettered with
// the reason), not passed on to the controller as an empty name.
func TestLifecycleRefusesUnnamed(t *testing.T) {
	d := &dependencies{}
	for _, tc := range []struct {
		typ     string
		handler func(context.Context, *call) (triggers.Outcome, error)
		want    string
	}{
		{messages.TypeNode, d.nodeChanged, `required field "name"`},
		{messages.TypeNodeClaimDeleting, d.terminate, `required field "name"`},
		{messages.TypeNodeClaimLiveness, d.liveness, `required field "name"`},
		{messages.TypeNodeClaimLaunch, d.launchCheck, `required field "name"`},
	} {
		_, err := tc.handler(t.Context(), &call{ev: event(t, "e1", tc.typ, map[string]string{"cluster": "c", "name": ""})})
		if !messages.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with no name: error %v, want an invalid message naming %s", tc.typ, err, tc.want)
		}
	}
}
