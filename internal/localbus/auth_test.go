package localbus

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// authBus is a bus with karpfunc's queues and rights table.
func authBus(t *testing.T) *Bus {
	t.Helper()
	b, _ := newBareBus(t, Options{Rights: bus.QueueRights})
	for _, q := range []string{bus.QueueProvision, bus.QueueLifecycle, bus.QueueInterruption, bus.QueueDisruption} {
		if err := b.CreateQueue(q, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// wantUnauthorized checks err is Service Bus's 401 as azservicebus surfaces
// it: an *azservicebus.Error with CodeUnauthorizedAccess whose text names
// the missing claim.
func wantUnauthorized(t *testing.T, err error, claim bus.Claim, queue string) {
	t.Helper()
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Fatalf("error = %v (%T); want an *azservicebus.Error with Code %q", err, err, azservicebus.CodeUnauthorizedAccess)
	}
	want := "(unauthorized): Unauthorized access. '" + string(claim) + "' claim(s) are required to perform this operation. Resource: 'sb://localhost/" + queue + "'."
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q; want Service Bus's text %q", err, want)
	}
}

// TestAuthorizationInProcess: each identity may do exactly what
// bus.QueueRights lists; anything else fails as Service Bus's 401.
func TestAuthorizationInProcess(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		identity bus.Identity
		queue    string
		claim    bus.Claim
		allowed  bool
	}{
		{"relay sends provision", bus.IdentityRelay, bus.QueueProvision, bus.ClaimSend, true},
		{"relay sends interruption", bus.IdentityRelay, bus.QueueInterruption, bus.ClaimSend, true},
		{"relay cannot receive", bus.IdentityRelay, bus.QueueProvision, bus.ClaimListen, false},
		{"functions send provision", bus.IdentityFunctions, bus.QueueProvision, bus.ClaimSend, true},
		{"functions cannot send interruption", bus.IdentityFunctions, bus.QueueInterruption, bus.ClaimSend, false},
		{"functions receive interruption", bus.IdentityFunctions, bus.QueueInterruption, bus.ClaimListen, true},
		{"functions read runtime properties", bus.IdentityFunctions, bus.QueueDisruption, bus.ClaimManage, true},
		{"relay cannot read runtime properties", bus.IdentityRelay, bus.QueueDisruption, bus.ClaimManage, false},
		{"event grid sends interruption", bus.IdentityEventGrid, bus.QueueInterruption, bus.ClaimSend, true},
		{"event grid cannot send provision", bus.IdentityEventGrid, bus.QueueProvision, bus.ClaimSend, false},
		{"an unlisted identity cannot send", "someone", bus.QueueLifecycle, bus.ClaimSend, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := authBus(t)
			c := b.As(tt.identity)
			var err error
			switch tt.claim {
			case bus.ClaimSend:
				err = c.Publish(ctx, tt.queue, msg("m", ""))
			case bus.ClaimListen:
				if perr := b.Publish(ctx, tt.queue, msg("m", "")); perr != nil {
					t.Fatal(perr)
				}
				_, err = c.Receive(ctx, tt.queue)
			case bus.ClaimManage:
				_, err = c.RuntimeProperties(tt.queue)
			}
			if tt.allowed {
				if err != nil {
					t.Fatalf("%s %s on %s: %v; want allowed", tt.identity, tt.claim, tt.queue, err)
				}
				return
			}
			wantUnauthorized(t, err, tt.claim, tt.queue)
			if tt.claim == bus.ClaimSend && b.Stats()[tt.queue].Active != 0 {
				t.Errorf("a refused send enqueued a message")
			}
		})
	}
}

// TestAuthorizationOverHTTP: the relay's and the handler's publisher (the
// real pkg/bus HTTP client) present their identity's credential; an
// unlisted send fails as Service Bus's 401, as does a send with no or a
// foreign credential.
func TestAuthorizationOverHTTP(t *testing.T) {
	ctx := context.Background()
	b := authBus(t)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	relay := bus.NewHTTPPublisherWithCredential(srv.URL, srv.Client(), b.Credential(bus.IdentityRelay))
	if err := relay.Publish(ctx, bus.QueueInterruption, msg("ok", "")); err != nil {
		t.Fatalf("relay → interruption: %v", err)
	}
	if b.Credential(bus.IdentityRelay) != b.Credential(bus.IdentityRelay) {
		t.Error("Credential is not stable")
	}
	functions := bus.NewHTTPPublisherWithCredential(srv.URL, srv.Client(), b.Credential(bus.IdentityFunctions))
	err := functions.Publish(ctx, bus.QueueInterruption, msg("refused", ""))
	wantUnauthorized(t, err, bus.ClaimSend, bus.QueueInterruption)
	if !bus.IsUnauthorized(err) {
		t.Errorf("bus.IsUnauthorized(%v) = false", err)
	}
	for name, p := range map[string]bus.Publisher{
		"no credential":      bus.NewHTTPPublisher(srv.URL, srv.Client()),
		"foreign credential": bus.NewHTTPPublisherWithCredential(srv.URL, srv.Client(), "not-issued-here"),
	} {
		err := p.Publish(ctx, bus.QueueProvision, msg("anon", ""))
		if !bus.IsUnauthorized(err) || !strings.Contains(err.Error(), "Unauthorized access") {
			t.Errorf("%s: Publish = %v; want Service Bus's unauthorized error", name, err)
		}
	}
	resp, err := srv.Client().Post(srv.URL+"/queues/provision/messages", "application/json", strings.NewReader(`[]`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous POST = %d; want 401", resp.StatusCode)
	}
	if s := b.Stats()[bus.QueueInterruption]; s.Active != 1 {
		t.Errorf("interruption holds %d messages; want only the relay's", s.Active)
	}
}

// TestNoRightsNoAuthorization: a bus without Rights (a namespace reached
// with a key holding every claim) lets anyone do anything.
func TestNoRightsNoAuthorization(t *testing.T) {
	b, _ := newBus(t, Options{})
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	if err := bus.NewHTTPPublisher(srv.URL, srv.Client()).Publish(context.Background(), "q", msg("m", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.As("anyone").RuntimeProperties("q"); err != nil {
		t.Fatal(err)
	}
}
