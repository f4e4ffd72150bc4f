package customhandler

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

// serviceBusRequest is the contract's serviceBusTrigger request, verbatim in
// its quirks: a body as a JSON string, GUIDs and ids with an extra layer of
// quotes, numbers as strings, a timestamp without an offset.
const serviceBusRequest = `{"Data":{"msg":"{\"specversion\":\"1.0\",\"type\":\"com.karpfunc.provision.v1\",\"data\":{}}"},
 "Metadata":{"DeliveryCount":"3","LockToken":"\"4e77ab12-0000-4000-8000-000000000001\"","MessageId":"\"pod-uid:rv\"",
  "SessionId":"\"cluster-a\"",
  "ContentType":"\"application/json\"","SequenceNumber":"17","EnqueuedTimeUtc":"2023-10-12T20:13:49",
  "ExpiresAtUtc":"9999-12-31T23:59:59.9999999","ApplicationProperties":{"kind":"provision","n":12},"UserProperties":{},
  "Client":{"FullyQualifiedNamespace":"sb.example"},
  "sys":{"MethodName":"Provision","UtcNow":"2023-10-12T20:13:49.64Z","RandGuid":"b1c2d3e4-0000-4000-8000-000000000002"}}}`

const timerRequest = `{"Data":{"timer":{"Schedule":{"AdjustForDST":true},
  "ScheduleStatus":{"Last":"2023-10-12T20:10:00","Next":"2023-10-12T20:15:00+00:00","LastUpdated":"2023-10-12T20:10:00.0000001"},"IsPastDue":false}},
 "Metadata":{"sys":{"MethodName":"Sweep","UtcNow":"2023-10-12T20:15:00.01Z","RandGuid":"g"}}}`

func TestDecodeInvocation(t *testing.T) {
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		name    string
		body    string
		want    Metadata // Raw is not compared
		wantErr string
	}{{
		name: "contract service bus request",
		body: serviceBusRequest,
		want: Metadata{DeliveryCount: 3, SequenceNumber: 17, MessageID: "pod-uid:rv", SessionID: "cluster-a",
			LockToken: "4e77ab12-0000-4000-8000-000000000001", ContentType: "application/json",
			EnqueuedTimeUTC:       utc("2023-10-12T20:13:49Z"),
			ApplicationProperties: map[string]any{"kind": "provision", "n": json.Number("12")},
			Sys:                   Sys{MethodName: "Provision", UtcNow: utc("2023-10-12T20:13:49.64Z"), RandGUID: "b1c2d3e4-0000-4000-8000-000000000002"}},
	}, {
		name: "numbers as numbers, strings quoted once, offset timestamp, lowercase keys",
		body: `{"Data":{},"Metadata":{"deliveryCount":2,"messageId":"m-1","lockToken":"t","enqueuedTimeUtc":"2023-10-12T22:13:49.5+02:00","Sys":{"methodName":"X"}}}`,
		want: Metadata{DeliveryCount: 2, MessageID: "m-1", LockToken: "t",
			EnqueuedTimeUTC: utc("2023-10-12T20:13:49.5Z"), Sys: Sys{MethodName: "X"}},
	}, {
		name: "seven fractional digits without offset are UTC",
		body: `{"Metadata":{"EnqueuedTimeUtc":"\"2023-10-12T20:13:49.1234567\""}}`,
		want: Metadata{EnqueuedTimeUTC: utc("2023-10-12T20:13:49.1234567Z")},
	}, {
		name: ".NET invariant culture timestamp",
		body: `{"Metadata":{"EnqueuedTimeUtc":"10/12/2023 20:13:49"}}`,
		want: Metadata{EnqueuedTimeUTC: utc("2023-10-12T20:13:49Z")},
	}, {
		name: "UserProperties when ApplicationProperties is absent, properties as a JSON string",
		body: `{"Metadata":{"UserProperties":"{\"a\":\"b\"}"}}`,
		want: Metadata{ApplicationProperties: map[string]any{"a": "b"}},
	}, {
		name: "nulls are zero values",
		body: `{"Data":null,"Metadata":{"MessageId":null,"sys":null,"DeliveryCount":null}}`,
		want: Metadata{},
	}, {
		name: "no metadata at all",
		body: `{"Data":{"x":"1"}}`,
		want: Metadata{},
	}, {
		name:    "body is not JSON",
		body:    `DeliveryCount=1`,
		wantErr: "request body is not a Functions invocation envelope",
	}, {
		name:    "delivery count is not a number",
		body:    `{"Metadata":{"DeliveryCount":"\"one\""}}`,
		wantErr: `Metadata.DeliveryCount: want an integer, got "one"`,
	}, {
		name:    "message id is an object",
		body:    `{"Metadata":{"MessageId":{"a":1}}}`,
		wantErr: `Metadata.MessageId: want a string, got {"a":1}`,
	}, {
		name:    "bad timestamp",
		body:    `{"Metadata":{"EnqueuedTimeUtc":"yesterday"}}`,
		wantErr: `Metadata.EnqueuedTimeUtc: not a timestamp: "yesterday"`,
	}, {
		name:    "bad sys",
		body:    `{"Metadata":{"sys":{"UtcNow":"soon"}}}`,
		wantErr: `Metadata.sys: UtcNow: not a timestamp: "soon"`,
	}, {
		name:    "metadata is an array",
		body:    `{"Metadata":[1]}`,
		wantErr: `Metadata: want a JSON object, got [1]`,
	}, {
		name:    "application properties is a number",
		body:    `{"Metadata":{"ApplicationProperties":5}}`,
		wantErr: `Metadata.ApplicationProperties: want a JSON object, got 5`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := DecodeInvocation([]byte(tt.body), "inv-1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want it to contain %q", err, tt.wantErr)
				}
				if !messages.IsInvalid(err) {
					t.Errorf("err %v is not an InvalidError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeInvocation: %v", err)
			}
			if inv.InvocationID != "inv-1" {
				t.Errorf("InvocationID = %q", inv.InvocationID)
			}
			if inv.Data == nil {
				t.Errorf("Data is nil; want an empty map")
			}
			got := inv.Metadata
			got.Raw = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Metadata =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		binding string
		want    string
		wantErr string
	}{
		{name: "JSON string body (the usual form)", data: `{"msg":"{\"a\":1}"}`, binding: "msg", want: `{"a":1}`},
		{name: "object body", data: `{"msg":{"a":1}}`, binding: "msg", want: `{"a":1}`},
		{name: "array body", data: `{"msg":[1,2]}`, binding: "msg", want: `[1,2]`},
		{name: "doubly quoted body", data: `{"msg":"\"{\\\"a\\\":1}\""}`, binding: "msg", want: `{"a":1}`},
		{name: "plain text body", data: `{"msg":"hello"}`, binding: "msg", want: `hello`},
		{name: "contract request", data: "", binding: "msg", want: `{"specversion":"1.0","type":"com.karpfunc.provision.v1","data":{}}`},
		{name: "missing binding names what is there", data: `{"msg":"x","other":"y"}`, binding: "event", wantErr: `no binding "event" in the request Data (have msg, other)`},
		{name: "null body", data: `{"msg":null}`, binding: "msg", wantErr: `binding "msg" is null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := serviceBusRequest
			if tt.data != "" {
				body = `{"Data":` + tt.data + `}`
			}
			inv, err := DecodeInvocation([]byte(body), "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := inv.Message(tt.binding)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !messages.IsInvalid(err) {
					t.Fatalf("err = %v; want an InvalidError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Message = %s; want %s", got, tt.want)
			}
		})
	}
}

func TestTimer(t *testing.T) {
	inv, err := DecodeInvocation([]byte(timerRequest), "")
	if err != nil {
		t.Fatal(err)
	}
	ti, err := inv.Timer("timer")
	if err != nil {
		t.Fatal(err)
	}
	if !ti.Schedule.AdjustForDST || ti.IsPastDue || ti.ScheduleStatus == nil {
		t.Fatalf("TimerInfo = %+v", ti)
	}
	if want := time.Date(2023, 10, 12, 20, 15, 0, 0, time.UTC); !ti.ScheduleStatus.Next.Equal(want) {
		t.Errorf("Next = %v; want %v", ti.ScheduleStatus.Next, want)
	}
	if want := time.Date(2023, 10, 12, 20, 10, 0, 100, time.UTC); !ti.ScheduleStatus.LastUpdated.Equal(want) {
		t.Errorf("LastUpdated = %v; want %v", ti.ScheduleStatus.LastUpdated, want)
	}
	if inv.Metadata.Sys.MethodName != "Sweep" {
		t.Errorf("MethodName = %q", inv.Metadata.Sys.MethodName)
	}
}

func TestTimerLenient(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
		wantNilStatus       bool
		wantPastDue         bool
	}{
		{name: "null status", data: `{"t":{"Schedule":{"AdjustForDST":false},"ScheduleStatus":null,"IsPastDue":"True"}}`, wantNilStatus: true, wantPastDue: true},
		{name: "not an object", data: `{"t":5}`, wantErr: `timer binding "t": want a JSON object, got 5`},
		{name: "bad past due", data: `{"t":{"IsPastDue":"maybe"}}`, wantErr: `IsPastDue: want a boolean, got "maybe"`},
		{name: "bad next", data: `{"t":{"ScheduleStatus":{"Next":"later"}}}`, wantErr: `ScheduleStatus.Next: not a timestamp: "later"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := DecodeInvocation([]byte(`{"Data":`+tt.data+`}`), "")
			if err != nil {
				t.Fatal(err)
			}
			ti, err := inv.Timer("t")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (ti.ScheduleStatus == nil) != tt.wantNilStatus || ti.IsPastDue != tt.wantPastDue {
				t.Errorf("TimerInfo = %+v", ti)
			}
		})
	}
}
