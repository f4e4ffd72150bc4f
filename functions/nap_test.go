package main

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/kubeauth"
)

func TestNodeProvisioningMode(t *testing.T) {
	for _, tc := range []struct {
		value, wantErr string
		nap            bool
	}{
		{"Manual", "", false},
		{"manual", "", false},
		{"", "app setting KARPFUNC_NODE_PROVISIONING_MODE is not set", false},
		{"Auto", "node auto provisioning (NAP) is enabled on this cluster", true},
		{"Automatic", `KARPFUNC_NODE_PROVISIONING_MODE="Automatic" is not a node provisioning mode`, false},
	} {
		t.Run(tc.value, func(t *testing.T) {
			err := checkNodeProvisioningMode(func(k string) string { return map[string]string{EnvNodeProvisioningMode: tc.value}[k] })
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var nap *NAPEnabledError
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.As(err, &nap) != tc.nap {
				t.Fatalf("err = %v; want %q (NAP refusal: %t)", err, tc.wantErr, tc.nap)
			}
		})
	}
}

// TestHandlerRefusesWithNAP: with NAP on, the handler's first step refuses,
// naming the setting to change, before it builds any client; with it off it
// goes on to the next missing setting.
func TestHandlerRefusesWithNAP(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
	}{
		{"Auto", "--node-provisioning-mode Manual"},
		{"Manual", kubeauth.EnvAPIServerURL + ": not set"},
	} {
		d := newDependencies(func(k string) string { return map[string]string{EnvNodeProvisioningMode: tc.mode}[k] }, slog.New(slog.DiscardHandler))
		if _, _, err := d.get(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mode %s: get() = %v; want an error containing %q", tc.mode, err, tc.want)
		}
	}
}
