package messages

import (
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"valid", `{"specversion":"1.0","id":"a","source":"s","type":"t","data":{}}`, ""},
		{"extension attribute from a newer producer", `{"specversion":"1.0","id":"a","source":"s","type":"t","traceparent":"00-x","data":{}}`, ""},
		{"not json", `hello`, "not a JSON CloudEvent"},
		{"wrong spec version", `{"specversion":"0.3","id":"a","type":"t"}`, `specversion is "0.3"`},
		{"no id", `{"specversion":"1.0","type":"t"}`, "has no id"},
		{"no type", `{"specversion":"1.0","id":"a"}`, "has no type"},
		{"empty", ``, "not a JSON CloudEvent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v; want one containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !IsInvalid(err):
				t.Fatalf("error %v is not an InvalidError", err)
			}
		})
	}
}

func TestDecodeData(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    Provision
		wantErr string
	}{
		{"pods", `{"cluster":"c1","pods":[{"namespace":"default","name":"p","uid":"u"}]}`,
			Provision{Cluster: "c1", Pods: []ObjectRef{{Namespace: "default", Name: "p", UID: "u"}}}, ""},
		{"no pods (a resync)", `{"cluster":"c1"}`, Provision{Cluster: "c1"}, ""},
		// A newer relay may add fields: an older handler ignores them.
		{"unknown top-level field", `{"cluster":"c1","podz":[],"priority":7}`, Provision{Cluster: "c1"}, ""},
		{"unknown nested field", `{"cluster":"c1","pods":[{"namespace":"default","name":"p","node":"n1"}]}`,
			Provision{Cluster: "c1", Pods: []ObjectRef{{Namespace: "default", Name: "p"}}}, ""},
		{"missing cluster", `{"pods":[]}`, Provision{}, `required field "cluster" is missing`},
		{"empty cluster", `{"cluster":""}`, Provision{}, `required field "cluster" is missing`},
		{"pod without a name", `{"cluster":"c1","pods":[{"namespace":"default"}]}`, Provision{}, `pods[0]: required field "name"`},
		{"wrong type", `{"cluster":3}`, Provision{}, "cannot unmarshal number"},
		{"not an object", `[1,2]`, Provision{}, "cannot unmarshal array"},
		{"no data", ``, Provision{}, "has no data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := CloudEvent{SpecVersion: SpecVersion, ID: "x", Type: TypeProvision, Data: []byte(tt.data)}
			got, err := DecodeData[Provision](ev)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !IsInvalid(err) {
					t.Fatalf("error %v; want an InvalidError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Cluster != tt.want.Cluster || len(got.Pods) != len(tt.want.Pods) || (len(got.Pods) > 0 && got.Pods[0] != tt.want.Pods[0]) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeDataRequiredFields(t *testing.T) {
	node := func(data string) error {
		_, err := DecodeData[Node](CloudEvent{SpecVersion: SpecVersion, ID: "x", Type: TypeNode, Data: []byte(data)})
		return err
	}
	claim := func(data string) error {
		_, err := DecodeData[NodeClaim](CloudEvent{SpecVersion: SpecVersion, ID: "x", Type: TypeNodeClaimLiveness, Data: []byte(data)})
		return err
	}
	for _, tc := range []struct {
		name    string
		decode  func(string) error
		data    string
		wantErr string
	}{
		{"node", node, `{"cluster":"c","name":"n","ready":true}`, ""},
		{"node from a newer relay", node, `{"cluster":"c","name":"n","ready":true,"zone":"eastus-1"}`, ""},
		{"node without a name", node, `{"cluster":"c","nodeName":"n"}`, `required field "name"`},
		{"node without a cluster", node, `{"name":"n"}`, `required field "cluster"`},
		{"node with ready as a string", node, `{"cluster":"c","name":"n","ready":"yes"}`, "cannot unmarshal string"},
		{"nodeclaim", claim, `{"cluster":"c","name":"nc","uid":"u"}`, ""},
		{"nodeclaim from a newer handler", claim, `{"cluster":"c","name":"nc","uid":"u","attempt":2}`, ""},
		{"nodeclaim without a name", claim, `{"cluster":"c","uid":"u"}`, `required field "name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode(tc.data)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v; want an InvalidError containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 2, 3, 0, time.FixedZone("x", 3600))
	ev, err := New("id-7", "/relay/c1", TypeNode, "node/n1", now, Node{Cluster: "c1", Name: "n1", Ready: true})
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Time.Equal(now) || ev.Time.Location() != time.UTC {
		t.Errorf("time %v; want %v in UTC", ev.Time, now)
	}
	n, err := DecodeData[Node](ev)
	if err != nil || n.Name != "n1" || !n.Ready {
		t.Fatalf("round trip: %+v, %v", n, err)
	}
}

func TestDecodeDisruptionCommand(t *testing.T) {
	for _, tc := range []struct{ data, wantErr string }{
		{`{"cluster":"c","method":"emptiness","reason":"Empty","candidates":[{"name":"a","uid":"u"}]}`, ""},
		{`{"cluster":"c","method":"emptiness","reason":"Empty","candidates":[]}`, `"candidates" is empty`},
		{`{"cluster":"c","method":"emptiness","reason":"Empty","candidates":[{"name":"a"}]}`, "candidates[0]: name and uid are required"},
		{`{"cluster":"c","reason":"Empty","candidates":[{"name":"a","uid":"u"}]}`, `required field "method"`},
	} {
		_, err := DecodeData[DisruptionCommand](CloudEvent{SpecVersion: SpecVersion, ID: "x", Type: TypeDisruptionValidate, Data: []byte(tc.data)})
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.data, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !IsInvalid(err)):
			t.Errorf("%s: error %v; want an InvalidError containing %q", tc.data, err, tc.wantErr)
		}
	}
}
