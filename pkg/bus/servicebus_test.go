package bus

import (
	"context"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// staticCredential is a real azcore.TokenCredential that hands out a fixed
// token: enough to build a client, which does no I/O until it sends.
type staticCredential struct{}

func (staticCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "t", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func TestNewServiceBusPublisherOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    ServiceBusOptions
		wantErr string
	}{
		{name: "emulator connection string", opts: ServiceBusOptions{ConnectionString: "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;"}},
		{name: "namespace connection string", opts: ServiceBusOptions{ConnectionString: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v"}},
		{name: "connection string wins over namespace", opts: ServiceBusOptions{ConnectionString: "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;", Namespace: "ns.servicebus.windows.net"}},
		{name: "namespace with managed identity", opts: ServiceBusOptions{Namespace: "ns.servicebus.windows.net", ClientID: "00000000-0000-0000-0000-000000000001"}},
		{name: "namespace with credential", opts: ServiceBusOptions{Namespace: "ns.servicebus.windows.net", Credential: staticCredential{}}},
		{name: "nothing", opts: ServiceBusOptions{}, wantErr: "needs a connection string or a fully qualified namespace"},
		{name: "client id alone", opts: ServiceBusOptions{ClientID: "x"}, wantErr: "needs a connection string or a fully qualified namespace"},
		{name: "connection string without key", opts: ServiceBusOptions{ConnectionString: "Endpoint=sb://ns.servicebus.windows.net/"}, wantErr: `key "SharedAccessKeyName" must not be empty`},
		{name: "connection string garbage", opts: ServiceBusOptions{ConnectionString: "garbage"}, wantErr: "service bus connection string"},
		{name: "emulator with https endpoint", opts: ServiceBusOptions{ConnectionString: "Endpoint=https://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"}, wantErr: "UseDevelopmentEmulator=true can only be used with sb://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "")
			p, err := NewServiceBusPublisher(context.Background(), tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewServiceBusPublisher() = %v; want error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "SharedAccessKey=v") {
					t.Fatalf("error leaks the connection string: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewServiceBusPublisher() = %v", err)
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatalf("Close() = %v", err)
			}
		})
	}
}

func TestWorkloadIdentityNeedsItsEnvironment(t *testing.T) {
	// With a federated token file but no tenant, the credential cannot be
	// built; the error must say so at construction, not at the first send.
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "/var/run/secrets/azure/tokens/azure-identity-token")
	t.Setenv("AZURE_TENANT_ID", "")
	t.Setenv("AZURE_CLIENT_ID", "")
	_, err := NewServiceBusPublisher(context.Background(), ServiceBusOptions{Namespace: "ns.servicebus.windows.net"})
	if err == nil || !strings.Contains(err.Error(), "workload identity credential") {
		t.Fatalf("NewServiceBusPublisher() = %v; want a workload identity credential error", err)
	}
}

func TestToServiceBusMessage(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	atUTC := at.UTC()
	tests := []struct {
		name string
		in   Message
		want *azservicebus.Message
	}{
		{name: "minimal: optional fields stay nil", in: Message{ID: "a", Body: []byte("b")},
			want: &azservicebus.Message{MessageID: ptr("a"), Body: []byte("b")}},
		{name: "everything", in: Message{ID: "a", SessionID: "cluster-1", ContentType: "application/cloudevents+json", Body: []byte("b"),
			ScheduledEnqueueTime: at, ApplicationProperties: map[string]any{"type": "x", "n": 2}},
			want: &azservicebus.Message{MessageID: ptr("a"), SessionID: ptr("cluster-1"), ContentType: ptr("application/cloudevents+json"),
				Body: []byte("b"), ScheduledEnqueueTime: &atUTC, ApplicationProperties: map[string]any{"type": "x", "n": 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toServiceBusMessage(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("toServiceBusMessage() = %+v; want %+v", got, tt.want)
			}
			if tt.in.ApplicationProperties != nil {
				got.ApplicationProperties["mutated"] = true
				if _, ok := tt.in.ApplicationProperties["mutated"]; ok {
					t.Fatal("conversion shares the caller's ApplicationProperties map")
				}
			}
		})
	}
}

func TestSplitScheduled(t *testing.T) {
	t1 := time.Unix(1000, 0)
	t2 := time.Unix(2000, 0)
	msgs := []Message{
		{ID: "now1", Body: []byte("x")},
		{ID: "late", Body: []byte("x"), ScheduledEnqueueTime: t2},
		{ID: "early1", Body: []byte("x"), ScheduledEnqueueTime: t1},
		{ID: "now2", Body: []byte("x")},
		{ID: "early2", Body: []byte("x"), ScheduledEnqueueTime: t1.In(time.FixedZone("y", 7200))}, // same instant, other zone
	}
	now, sched := splitScheduled(msgs)
	ids := func(ms []*azservicebus.Message) (out []string) {
		for _, m := range ms {
			out = append(out, *m.MessageID)
		}
		return out
	}
	if got := ids(now); !reflect.DeepEqual(got, []string{"now1", "now2"}) {
		t.Errorf("immediate = %v; want [now1 now2]", got)
	}
	if len(sched) != 2 {
		t.Fatalf("got %d scheduled groups; want 2", len(sched))
	}
	if !sched[0].at.Equal(t1) || !reflect.DeepEqual(ids(sched[0].msgs), []string{"early1", "early2"}) {
		t.Errorf("group 0 = %v %v; want %v [early1 early2]", sched[0].at, ids(sched[0].msgs), t1)
	}
	if !sched[1].at.Equal(t2) || !reflect.DeepEqual(ids(sched[1].msgs), []string{"late"}) {
		t.Errorf("group 1 = %v %v; want %v [late]", sched[1].at, ids(sched[1].msgs), t2)
	}
}

func TestServiceBusPublishErrors(t *testing.T) {
	// A port nothing listens on: the emulator connection string is accepted,
	// and the send must fail with an error naming the queue, promptly.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	newPub := func(t *testing.T) Publisher {
		p, err := NewServiceBusPublisher(context.Background(), ServiceBusOptions{
			ConnectionString: "Endpoint=sb://" + addr + ";SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;",
			ClientOptions:    &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		close   bool
		msgs    []Message
		wantErr string
	}{
		{name: "invalid message fails before any I/O", msgs: []Message{{ID: "", Body: []byte("x")}}, wantErr: "id is empty"},
		{name: "closed publisher", close: true, msgs: []Message{{ID: "a", Body: []byte("x")}}, wantErr: "publisher is closed"},
		{name: "unreachable namespace", msgs: []Message{{ID: "a", Body: []byte("x")}}, wantErr: `queue "provision"`},
		{name: "unreachable namespace, scheduled", msgs: []Message{{ID: "a", Body: []byte("x"), ScheduledEnqueueTime: time.Now().Add(time.Hour)}}, wantErr: `scheduling 1 message(s) on queue "provision"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPub(t)
			defer p.Close(context.Background())
			if tt.close {
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := p.Publish(ctx, QueueProvision, tt.msgs...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Publish() = %v; want error containing %q", err, tt.wantErr)
			}
		})
	}
}
