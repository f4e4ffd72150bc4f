package bus

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// recordingServer is a real HTTP server speaking the local bus contract: it
// records what it received and answers with the configured status and text.
type recordingServer struct {
	mu       sync.Mutex
	requests []recordedRequest
	status   int
	text     string
}

type recordedRequest struct {
	method, path, contentType string
	raw                       []byte
}

func (s *recordingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, recordedRequest{method: r.Method, path: r.URL.EscapedPath(), contentType: r.Header.Get("Content-Type"), raw: raw})
	s.mu.Unlock()
	w.WriteHeader(s.status)
	_, _ = io.WriteString(w, s.text)
}

func TestHTTPPublisher(t *testing.T) {
	sched := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := []Message{
		{ID: "provision/abc", SessionID: "c1", ContentType: "application/cloudevents+json", Body: []byte(`{"a":1}`),
			ApplicationProperties: map[string]any{"type": "t"}},
		{ID: "later", Body: []byte("\x00\x01binary"), ScheduledEnqueueTime: sched},
	}
	tests := []struct {
		name      string
		queue     string
		status    int
		text      string
		msgs      []Message
		wantErr   []string // substrings; nil means success
		wantPath  string   // "" means no request may reach the server
		wantCount int
	}{
		{name: "accepted", queue: QueueProvision, status: http.StatusAccepted, msgs: msgs, wantPath: "/queues/provision/messages", wantCount: 2},
		{name: "other 2xx is success", queue: QueueLifecycle, status: http.StatusOK, msgs: msgs[:1], wantPath: "/queues/lifecycle/messages", wantCount: 1},
		{name: "queue name is escaped", queue: "a b/c", status: http.StatusAccepted, msgs: msgs[:1], wantPath: "/queues/a%20b%2Fc/messages", wantCount: 1},
		{name: "server error carries status and text", queue: QueueProvision, status: http.StatusInternalServerError, text: "queue full\n", msgs: msgs,
			wantErr: []string{"500 Internal Server Error", "queue full", `queue "provision"`}, wantPath: "/queues/provision/messages", wantCount: 2},
		{name: "not found", queue: "nope", status: http.StatusNotFound, text: "no queue nope", msgs: msgs[:1],
			wantErr: []string{"404 Not Found", "no queue nope"}, wantPath: "/queues/nope/messages", wantCount: 1},
		{name: "invalid message never sent", queue: QueueProvision, status: http.StatusAccepted, msgs: []Message{{ID: "x"}},
			wantErr: []string{"body is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &recordingServer{status: tt.status, text: tt.text}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			p := NewHTTPPublisher(ts.URL+"/", ts.Client())
			defer p.Close(context.Background())

			err := p.Publish(context.Background(), tt.queue, tt.msgs...)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("Publish() = %v; want nil", err)
			}
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Publish() = nil; want error containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Publish() = %q; want it to contain %q", err, w)
					}
				}
			}
			if tt.wantPath == "" {
				if len(srv.requests) != 0 {
					t.Fatalf("server got %d request(s); want none", len(srv.requests))
				}
				return
			}
			if len(srv.requests) != 1 {
				t.Fatalf("server got %d request(s); want 1", len(srv.requests))
			}
			req := srv.requests[0]
			if req.method != http.MethodPost || req.path != tt.wantPath || req.contentType != "application/json" {
				t.Errorf("request = %s %s (%s); want POST %s (application/json)", req.method, req.path, req.contentType, tt.wantPath)
			}
			// The wire format is the contract with the local host: a JSON
			// array of Message whose body is base64.
			var wire []map[string]any
			if err := json.Unmarshal(req.raw, &wire); err != nil {
				t.Fatalf("request body is not a JSON array: %v: %s", err, req.raw)
			}
			if len(wire) != tt.wantCount {
				t.Fatalf("request carries %d message(s); want %d", len(wire), tt.wantCount)
			}
			if got, want := wire[0]["body"], base64.StdEncoding.EncodeToString(tt.msgs[0].Body); got != want {
				t.Errorf("body on the wire = %v; want base64 %q", got, want)
			}
			var decoded []Message
			if err := json.Unmarshal(req.raw, &decoded); err != nil {
				t.Fatal(err)
			}
			for i := range decoded {
				want := tt.msgs[i]
				if want.ApplicationProperties != nil {
					// JSON keeps strings as strings; compare the rest exactly.
					if !reflect.DeepEqual(decoded[i].ApplicationProperties, want.ApplicationProperties) {
						t.Errorf("message %d properties = %v; want %v", i, decoded[i].ApplicationProperties, want.ApplicationProperties)
					}
				}
				decoded[i].ApplicationProperties, want.ApplicationProperties = nil, nil
				if !decoded[i].ScheduledEnqueueTime.Equal(want.ScheduledEnqueueTime) {
					t.Errorf("message %d scheduled = %v; want %v", i, decoded[i].ScheduledEnqueueTime, want.ScheduledEnqueueTime)
				}
				decoded[i].ScheduledEnqueueTime, want.ScheduledEnqueueTime = time.Time{}, time.Time{}
				if !reflect.DeepEqual(decoded[i], want) {
					t.Errorf("message %d = %+v; want %+v", i, decoded[i], want)
				}
			}
		})
	}
}

func TestHTTPPublisherUnreachable(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there any more
	p := NewHTTPPublisher(url, nil)
	err := p.Publish(context.Background(), QueueLifecycle, Message{ID: "a", Body: []byte("x")})
	if err == nil || !strings.Contains(err.Error(), `queue "lifecycle"`) || !strings.Contains(err.Error(), url) {
		t.Fatalf("Publish() = %v; want a connection error naming the queue and %s", err, url)
	}
}

// TestHTTPPublisherCredentialAndUnauthorized: the publisher presents its
// identity's credential, and the local bus's 401 comes back in the shape
// azservicebus gives Service Bus's unauthorized access.
func TestHTTPPublisherCredentialAndUnauthorized(t *testing.T) {
	var auth string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"Unauthorized access. 'Send' claim(s) are required to perform this operation. Resource: 'sb://localhost/provision'.","code":"unauthorized"}`)
	}))
	defer ts.Close()
	err := NewHTTPPublisherWithCredential(ts.URL, ts.Client(), "tok").Publish(context.Background(), QueueProvision, Message{ID: "a", SessionID: "s", Body: []byte("x")})
	if auth != "Bearer tok" {
		t.Errorf("Authorization = %q; want Bearer tok", auth)
	}
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess || !IsUnauthorized(err) ||
		!strings.Contains(err.Error(), "(unauthorized): Unauthorized access. 'Send' claim(s) are required") {
		t.Fatalf("Publish() = %v; want an *azservicebus.Error with CodeUnauthorizedAccess and Service Bus's text", err)
	}
	if IsUnauthorized(errors.New("other")) {
		t.Error("IsUnauthorized(other error) = true")
	}
}
