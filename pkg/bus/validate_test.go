package bus

import (
	"strings"
	"testing"
	"time"
)

func TestValidateMessages(t *testing.T) {
	ok := Message{ID: "m1", Body: []byte("{}")}
	long := strings.Repeat("x", MaxIDLength+1)
	tests := []struct {
		name    string
		queue   string
		msgs    []Message
		wantErr string // substring; empty means valid
	}{
		{name: "valid", queue: QueueProvision, msgs: []Message{ok}},
		{name: "valid with all fields", queue: QueueLifecycle, msgs: []Message{{
			ID: "m1", SessionID: "c1", ContentType: "application/json", Body: []byte("x"),
			ScheduledEnqueueTime:  time.Unix(100, 0),
			ApplicationProperties: map[string]any{"s": "a", "i": 1, "f": 1.5, "b": true, "t": time.Unix(1, 0), "n": nil, "u": uint8(1), "raw": []byte("r")},
		}}},
		{name: "max length ids", queue: "q", msgs: []Message{{ID: long[:MaxIDLength], SessionID: long[:MaxIDLength], Body: []byte("x")}}},
		{name: "empty queue", queue: "", msgs: []Message{ok}, wantErr: "queue name is empty"},
		{name: "no messages", queue: "q", msgs: nil, wantErr: `no messages to publish to queue "q"`},
		{name: "empty id", queue: "q", msgs: []Message{{Body: []byte("x")}}, wantErr: `message 0 (id ""): id is empty`},
		{name: "long id", queue: "q", msgs: []Message{{ID: long, Body: []byte("x")}}, wantErr: "id is 129 characters; Service Bus allows at most 128"},
		{name: "invalid utf8 id", queue: "q", msgs: []Message{{ID: "\xff", Body: []byte("x")}}, wantErr: "id is not valid UTF-8"},
		{name: "long session", queue: "q", msgs: []Message{{ID: "a", SessionID: long, Body: []byte("x")}}, wantErr: "sessionId is 129 characters"},
		{name: "empty body", queue: "q", msgs: []Message{ok, {ID: "m2"}}, wantErr: `message 1 (id "m2"): body is empty`},
		{name: "duplicate id", queue: "q", msgs: []Message{ok, ok}, wantErr: `message 1 (id "m1"): same id as message 0`},
		{name: "unsupported property", queue: "q", msgs: []Message{{ID: "a", Body: []byte("x"), ApplicationProperties: map[string]any{"m": map[string]string{}}}},
			wantErr: `application property "m": value of type map[string]string is not supported`},
		{name: "empty property name", queue: "q", msgs: []Message{{ID: "a", Body: []byte("x"), ApplicationProperties: map[string]any{"": "v"}}},
			wantErr: "application property with an empty name"},
		{name: "all errors reported", queue: "q", msgs: []Message{{ID: "a"}, {ID: "b"}}, wantErr: `message 1 (id "b"): body is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateMessages(tt.queue, tt.msgs)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ValidateMessages() = %v; want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("ValidateMessages() = nil; want error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("ValidateMessages() = %q; want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
