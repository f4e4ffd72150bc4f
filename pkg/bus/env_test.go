package bus

import (
	"context"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	emulator := "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
	tests := []struct {
		name    string
		env     map[string]string
		want    string // "http" or "servicebus"
		wantErr []string
	}{
		{name: "local bus", env: map[string]string{EnvLocalBusURL: "http://127.0.0.1:7072"}, want: "http"},
		{name: "local bus wins over service bus", env: map[string]string{EnvLocalBusURL: "http://127.0.0.1:7072", EnvServiceBusConnection: emulator}, want: "http"},
		{name: "connection string", env: map[string]string{EnvServiceBusConnection: emulator}, want: "servicebus"},
		{name: "namespace with identity", env: map[string]string{EnvServiceBusNamespace: "ns.servicebus.windows.net", EnvServiceBusClientID: "00000000-0000-0000-0000-000000000001"}, want: "servicebus"},
		{name: "namespace with system identity", env: map[string]string{EnvServiceBusNamespace: "ns.servicebus.windows.net"}, want: "servicebus"},
		{name: "bad connection string", env: map[string]string{EnvServiceBusConnection: "Endpoint=sb://x;"},
			wantErr: []string{"service bus connection string", "SharedAccessKeyName"}},
		{name: "nothing configured", env: map[string]string{},
			wantErr: []string{EnvLocalBusURL, EnvServiceBusConnection + " ", EnvServiceBusNamespace, EnvServiceBusClientID}},
		{name: "client id alone is not enough", env: map[string]string{EnvServiceBusClientID: "x"}, wantErr: []string{"no message bus configured"}},
		{name: "malformed queue name", env: map[string]string{EnvLocalBusURL: "http://127.0.0.1:7072", EnvLifecycleQueue: "life cycle"},
			wantErr: []string{EnvLifecycleQueue, `"life cycle"`, "not a Service Bus queue name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "") // managed identity path, deterministic
			p, err := fromEnv(func(k string) string { return tt.env[k] })
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("fromEnv() = %T; want error", p)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("fromEnv() error %q; want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("fromEnv() = %v", err)
			}
			defer p.Close(context.Background())
			got := ""
			r, ok := p.(renaming)
			if !ok {
				t.Fatalf("fromEnv() = %T; want the queue-name mapping around the transport", p)
			}
			switch r.Publisher.(type) {
			case *httpPublisher:
				got = "http"
			case *serviceBusPublisher:
				got = "servicebus"
			}
			if got != tt.want {
				t.Fatalf("fromEnv() = %T; want %s publisher", p, tt.want)
			}
		})
	}
}

type recordingPublisher struct{ queues []string }

func (r *recordingPublisher) Publish(_ context.Context, queue string, _ ...Message) error {
	r.queues = append(r.queues, queue)
	return nil
}
func (r *recordingPublisher) Close(context.Context) error { return nil }

// TestQueueNamesFromSettings: publishers name logical queues; the settings
// the Functions' triggers bind to decide the entities.
func TestQueueNamesFromSettings(t *testing.T) {
	env := map[string]string{EnvProvisionQueue: "karpfunc-provision", EnvInterruptionQueue: "prod/interruption"}
	names, err := QueueNamesFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingPublisher{}
	p := WithQueueNames(rec, names)
	for _, q := range []string{QueueProvision, QueueLifecycle, QueueInterruption, "echo"} {
		if err := p.Publish(context.Background(), q, Message{ID: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"karpfunc-provision", "lifecycle", "prod/interruption", "echo"}
	if strings.Join(rec.queues, ",") != strings.Join(want, ",") {
		t.Fatalf("published to %v; want %v", rec.queues, want)
	}
	for _, bad := range []string{"-leading", "trailing-", "a b", strings.Repeat("q", 261)} {
		if _, err := QueueNamesFromEnv(func(k string) string { return map[string]string{EnvProvisionQueue: bad}[k] }); err == nil {
			t.Errorf("queue name %q accepted", bad)
		}
	}
}
