package decisions

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azeventgrid"
)

var launch = Record{Decision: Launch, Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Cluster: "prod", NodePool: "default",
	NodeClaim: "default-abc12", Size: "Standard_D4s_v5", Zone: "eastus-1", CapacityType: "spot", PricePerHour: 0.0412,
	Reason: "provisioning", Pods: []string{"web/a", "web/b"}}

// TestLogLine: one JSON line per decision with every schema field, and
// nothing else beside slog's own keys.
func TestLogLine(t *testing.T) {
	var buf bytes.Buffer
	NewRecorder(slog.New(slog.NewJSONHandler(&buf, nil))).Record(context.Background(), launch)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines; want 1:\n%s", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range append([]string{"time", "level", "msg"}, Fields...) {
		if _, ok := got[k]; !ok {
			t.Errorf("log line lacks %q: %s", k, lines[0])
		}
	}
	for k := range got {
		if !slices.Contains(Fields, k) && k != "time" && k != "level" && k != "msg" {
			t.Errorf("log line has %q, which Fields does not list", k)
		}
	}
	if got["msg"] != Message || got["decision"] != "launch" || got["size"] != "Standard_D4s_v5" || got["pricePerHour"] != 0.0412 ||
		got["schema"] != SchemaVersion || len(got["pods"].([]any)) != 2 {
		t.Errorf("log line = %s", lines[0])
	}
}

// eventGridTopic speaks Event Grid's publish API for a topic with the
// CloudEvents v1.0 input schema: POST /api/events?api-version=2018-01-01,
// a bearer token, Content-Type application/cloudevents-batch+json, a JSON
// array of CloudEvents each with id, source, type and specversion 1.0.
type eventGridTopic struct {
	mu     sync.Mutex
	events []map[string]any
	fail   int // answer 503 to this many requests first
}

func (tp *eventGridTopic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.fail > 0 {
		tp.fail--
		fail(http.StatusServiceUnavailable, "ServiceUnavailable", "try later")
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/api/events" || r.URL.Query().Get("api-version") != "2018-01-01" {
		fail(http.StatusNotFound, "NotFound", r.Method+" "+r.URL.String())
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		fail(http.StatusUnauthorized, "Unauthorized", "no bearer token")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/cloudevents-batch+json" {
		fail(http.StatusBadRequest, "BadRequest", "content type "+r.Header.Get("Content-Type"))
		return
	}
	body, _ := io.ReadAll(r.Body)
	var batch []map[string]any
	if err := json.Unmarshal(body, &batch); err != nil {
		fail(http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	for _, ev := range batch {
		for _, k := range []string{"id", "source", "type", "specversion"} {
			if s, _ := ev[k].(string); s == "" {
				fail(http.StatusBadRequest, "BadRequest", "event lacks "+k)
				return
			}
		}
	}
	tp.events = append(tp.events, batch...)
}

type token struct{}

func (token) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "t", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func newTopic(t *testing.T, tp *eventGridTopic) *EventGrid {
	srv := httptest.NewTLSServer(tp)
	t.Cleanup(srv.Close)
	eg, err := NewEventGrid(srv.URL+"/api/events", token{}, &azeventgrid.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: srv.Client(), Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	return eg
}

func TestEventGridPublish(t *testing.T) {
	tp := &eventGridTopic{fail: 1} // a transient failure, retried by the SDK
	var logs bytes.Buffer
	rec := NewRecorder(slog.New(slog.NewJSONHandler(&logs, nil)), newTopic(t, tp))
	rec.Record(context.Background(), launch)
	rec.Record(context.Background(), launch) // a retried invocation's repeat
	if len(tp.events) != 2 {
		t.Fatalf("topic got %d events; want 2 (logs: %s)", len(tp.events), logs.String())
	}
	ev := tp.events[0]
	if ev["type"] != "com.karpfunc.nodeclaim.launched.v1" || ev["source"] != "/karpfunc/clusters/prod" ||
		ev["subject"] != "nodepools/default/nodeclaims/default-abc12" || ev["specversion"] != "1.0" {
		t.Errorf("event = %v", ev)
	}
	data, _ := ev["data"].(map[string]any)
	if data["nodeClaim"] != "default-abc12" || data["capacityType"] != "spot" || data["pricePerHour"] != 0.0412 {
		t.Errorf("event data = %v; want the decision record", data)
	}
	if tp.events[0]["id"] != tp.events[1]["id"] {
		t.Errorf("a repeated decision got ids %v and %v; want the same id so subscribers can drop it", tp.events[0]["id"], tp.events[1]["id"])
	}
	other := launch
	other.Decision, other.Reason = GiveUp, "InsufficientCapacity"
	a, _ := CloudEvent(launch)
	b, _ := CloudEvent(other)
	if a.ID == b.ID || b.Type != "com.karpfunc.nodeclaim.gaveup.v1" {
		t.Errorf("give-up event %s %s; want its own id and type", b.ID, b.Type)
	}
}

// TestPublishFailureNeverFailsTheDecision: a topic that refuses is one
// warning line; the decision's own line is written first.
func TestPublishFailureNeverFailsTheDecision(t *testing.T) {
	tp := &eventGridTopic{fail: 100}
	var logs bytes.Buffer
	NewRecorder(slog.New(slog.NewJSONHandler(&logs, nil)), newTopic(t, tp)).Record(context.Background(), launch)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], Message) || !strings.Contains(lines[1], "decision not published") ||
		!strings.Contains(lines[1], "ServiceUnavailable") {
		t.Fatalf("logs:\n%s\nwant the decision, then one warning naming the topic's error", logs.String())
	}
}

func TestEventGridEndpointRefused(t *testing.T) {
	for _, ep := range []string{"", "http://topic.eastus-1.eventgrid.azure.net/api/events", "topic.eastus-1"} {
		if _, err := NewEventGrid(ep, token{}, nil); err == nil || !strings.Contains(err.Error(), EnvEventGridEndpoint) {
			t.Errorf("NewEventGrid(%q) = %v; want an error naming %s", ep, err, EnvEventGridEndpoint)
		}
	}
}
