package main

import (
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/repair"
)

// TestRepairSettings: repair defaults to on with the provider's 10-minute
// Ready toleration; KARPFUNC_NODE_REPAIR=false turns it off; the
// toleration setting shortens the Ready policies only; bad values are
// refused by name.
func TestRepairSettings(t *testing.T) {
	for _, c := range []struct {
		name           string
		on, toleration string
		wantOff        bool
		wantReady      time.Duration
		wantErr        string
	}{
		{name: "defaults", wantReady: repair.DefaultReadyToleration},
		{name: "off", on: "false", wantOff: true},
		{name: "shortened", toleration: "20s", wantReady: 20 * time.Second},
		{name: "bad switch", on: "maybe", wantErr: `app setting KARPFUNC_NODE_REPAIR="maybe" is not true or false`},
		{name: "bad toleration", toleration: "-1m",
			wantErr: `app setting KARPFUNC_NODE_REPAIR_READY_TOLERATION="-1m" is not a positive Go duration (e.g. 15m, 90s)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDependencies(func(name string) string {
				switch name {
				case EnvNodeRepair:
					return c.on
				case EnvNodeRepairReadyToleration:
					return c.toleration
				}
				return ""
			}, nil)
			policies, err := d.repairSettings()
			if settingRefused(t, err, c.wantErr) {
				return
			}
			if c.wantOff {
				if policies != nil {
					t.Fatalf("repair off, but policies %v", policies)
				}
				return
			}
			if len(policies) == 0 {
				t.Fatal("repair on, but no policies")
			}
			for _, p := range policies {
				want := c.wantReady
				if p.Condition == repair.ConditionNodeHealthy {
					want = 0
				}
				if p.Toleration != want {
					t.Errorf("policy %s=%s tolerates %s, want %s", p.Condition, p.Status, p.Toleration, want)
				}
			}
		})
	}
}
