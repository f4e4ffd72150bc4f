package lifecycle

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

// TestLaunchAsk: a Provision pass asks for the first launch check of a
// young NodeClaim with no launch state under one ID, so two passes (or a
// redelivered one) start one chain of checks, not two racing ones; an old
// claim with no state, or a state whose check is long overdue, gets a check
// of its own; a state with a check still due gets none.
func TestLaunchAsk(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	claim := func(age time.Duration, state *launchState) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", UID: "u", CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if state != nil {
			raw, err := json.Marshal(state)
			if err != nil {
				t.Fatal(err)
			}
			nc.Annotations = map[string]string{apis.AnnotationLaunch: string(raw)}
		}
		return nc
	}
	for _, tc := range []struct {
		name   string
		nc     *karpv1.NodeClaim
		wantID string
	}{
		{"just created", claim(2*time.Second, nil), "nodeclaim/u/launch/first"},
		{"no state past the stall limit", claim(stalledLaunch+time.Second, nil), "nodeclaim/u/launch/1796205600000"},
		{"check due soon", claim(time.Minute, &launchState{Phase: phaseVM, Attempt: 1, NextCheck: now.Add(4 * time.Second)}), ""},
		{"check overdue within the stall limit", claim(time.Minute, &launchState{Phase: phaseVM, Attempt: 1, NextCheck: now.Add(-stalledLaunch / 2)}), ""},
		{"check overdue past the stall limit", claim(5*time.Minute, &launchState{Phase: phaseVM, Attempt: 1, NextCheck: now.Add(-stalledLaunch - time.Second)}), "nodeclaim/u/launch/1796205600000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check, ok := LaunchAsk("c", tc.nc, now)
			if got := map[bool]string{true: check.ID()}[ok]; got != tc.wantID {
				t.Errorf("asked for %q (ok %t); want %q", got, ok, tc.wantID)
			}
			if ok && !check.Due().Equal(now) {
				t.Errorf("check due %v; want now (%v)", check.Due(), now)
			}
		})
	}
}
