package main

import (
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
)

// TestProfileInvocations: requests are counted under the invocation they
// ran in, however deep, and spans of other services or with no invocation
// above them are left out.
func TestProfileInvocations(t *testing.T) {
	base := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	span := func(id, parent, name string, fromMillis, toMillis int) otlpreceiver.Span {
		return otlpreceiver.Span{Service: functionsService, SpanID: id, ParentSpanID: parent, Name: name,
			Start: base.Add(time.Duration(fromMillis) * time.Millisecond), End: base.Add(time.Duration(toMillis) * time.Millisecond)}
	}
	relayRoot := otlpreceiver.Span{Service: "karpfunc-relay", SpanID: "relay", Name: "provision send"}
	for _, tc := range []struct {
		name  string
		spans []otlpreceiver.Span
		want  map[string]map[string]requestTotal // function -> request name -> total
	}{
		{
			name: "requests under one pass, one nested under another span",
			spans: []otlpreceiver.Span{relayRoot,
				span("pass", "relay", "Provision process", 0, 5000),
				span("a", "pass", "kubernetes POST events", 0, 40),
				span("b", "pass", "kubernetes POST events", 50, 110),
				span("arm", "pass", "ARM PUT virtualMachines", 200, 700),
				span("inner", "arm", "kubernetes GET nodeclaims", 300, 320)},
			want: map[string]map[string]requestTotal{"Provision": {
				"kubernetes POST events":    {count: 2, spent: 100 * time.Millisecond},
				"ARM PUT virtualMachines":   {count: 1, spent: 500 * time.Millisecond},
				"kubernetes GET nodeclaims": {count: 1, spent: 20 * time.Millisecond}}},
		},
		{
			name: "two functions kept apart; an orphan and another service's span left out",
			spans: []otlpreceiver.Span{relayRoot,
				span("pass", "", "Provision process", 0, 1000),
				span("check", "", "Lifecycle process", 0, 1000),
				span("a", "pass", "kubernetes POST nodeclaims", 0, 30),
				span("b", "check", "kubernetes GET nodeclaims", 0, 10),
				span("orphan", "gone", "kubernetes GET pods", 0, 10),
				{Service: "karpfunc-relay", SpanID: "r", ParentSpanID: "pass", Name: "kubernetes LIST pods"}},
			want: map[string]map[string]requestTotal{
				"Provision": {"kubernetes POST nodeclaims": {count: 1, spent: 30 * time.Millisecond}},
				"Lifecycle": {"kubernetes GET nodeclaims": {count: 1, spent: 10 * time.Millisecond}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]map[string]requestTotal{}
			for _, inv := range profileInvocations(tc.spans) {
				totals := map[string]requestTotal{}
				for name, total := range inv.requests {
					totals[name] = requestTotal{count: total.count, spent: total.spent}
				}
				got[inv.function] = totals
			}
			if len(got) != len(tc.want) {
				t.Fatalf("invocations %v; want %v", got, tc.want)
			}
			for function, wantTotals := range tc.want {
				if len(got[function]) != len(wantTotals) {
					t.Fatalf("%s: requests %v; want %v", function, got[function], wantTotals)
				}
				for name, want := range wantTotals {
					if got[function][name] != want {
						t.Errorf("%s %s: %+v; want %+v", function, name, got[function][name], want)
					}
				}
			}
		})
	}
}
