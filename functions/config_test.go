package main

import (
	"testing"

	"github.com/karpfunc/karpfunc/pkg/disruption"
)

func TestDisruptionOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    disruption.Options
		wantErr string
	}{
		{"defaults", nil, disruption.Options{}, ""},
		{"spot to spot", map[string]string{EnvSpotToSpot: "true"}, disruption.Options{SpotToSpot: true}, ""},
		{"rebalance", map[string]string{EnvRebalance: "true"}, disruption.Options{Rebalance: true}, ""},
		{"rebalance off", map[string]string{EnvRebalance: "false", EnvSpotToSpot: "1"}, disruption.Options{SpotToSpot: true}, ""},
		{"bad rebalance", map[string]string{EnvRebalance: "yes"}, disruption.Options{}, `app setting KARPFUNC_REBALANCE_CONSOLIDATION="yes" is not true or false`},
		{"bad spot to spot", map[string]string{EnvSpotToSpot: "on"}, disruption.Options{}, `app setting KARPFUNC_SPOT_TO_SPOT_CONSOLIDATION="on" is not true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := disruptionOptions(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.SpotToSpot != tc.want.SpotToSpot || got.Rebalance != tc.want.Rebalance || got.TimeLimit == 0 {
				t.Errorf("options %+v, want %+v with a time limit", got, tc.want)
			}
		})
	}
}
