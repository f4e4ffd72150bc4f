package main

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

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
			if settingRefused(t, err, tc.wantErr) {
				return
			}
			if got.SpotToSpot != tc.want.SpotToSpot || got.Rebalance != tc.want.Rebalance || got.TimeLimit == 0 {
				t.Errorf("options %+v, want %+v with a time limit", got, tc.want)
			}
		})
	}
}

// TestAPICompression: the handler's clients ask for gzip unless
// KARPFUNC_API_COMPRESSION is false; a value that is not a bool is refused
// by name.
func TestAPICompression(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, value string
		want        bool
		wantErr     string
	}{
		{name: "unset: on", value: "", want: true},
		{name: "on", value: "true", want: true},
		{name: "off", value: "false", want: false},
		{name: "bad", value: "gzip", wantErr: `app setting KARPFUNC_API_COMPRESSION="gzip" is not true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvAPICompression: tc.value, "KUBECONFIG": kubeconfig}
			cfg, err := handlerRESTConfig(func(name string) string { return env[name] })
			if settingRefused(t, err, tc.wantErr) {
				return
			}
			if cfg.DisableCompression == tc.want {
				t.Errorf("DisableCompression = %t, want %t", cfg.DisableCompression, !tc.want)
			}
		})
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user: {token: "t"}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

// TestSnapshotCheckShared: KARPFUNC_SNAPSHOT_CHECK_SHARED turns the warm
// cache's check on (off when unset); any other value is refused by name.
func TestSnapshotCheckShared(t *testing.T) {
	for _, tc := range []struct {
		name, value, wantErr string
		want                 bool
	}{
		{name: "unset: off", value: ""},
		{name: "on", value: "true", want: true},
		{name: "off", value: "false"},
		{name: "bad", value: "yes please", wantErr: `app setting KARPFUNC_SNAPSHOT_CHECK_SHARED="yes please" is not true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &dependencies{getenv: func(name string) string {
				if name == EnvSnapshotCheckShared {
					return tc.value
				}
				return ""
			}}
			opts, err := d.cacheOptions(&rest.Config{Host: "https://127.0.0.1:6443"})
			if settingRefused(t, err, tc.wantErr) {
				return
			}
			if opts.CheckShared != tc.want || opts.Pages == nil {
				t.Errorf("cache options %+v; want CheckShared %t and a PageReader", opts, tc.want)
			}
		})
	}
}

// settingRefused checks err against wantErr, the refusal a bad setting
// must get ("" for none), and reports whether the case ends there.
func settingRefused(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Fatalf("err = %v, want %q", err, wantErr)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// TestQuotaAwareSetting: KARPFUNC_QUOTA_AWARE defaults to on, reads
// true/false, and a value that is neither is refused by name.
func TestQuotaAwareSetting(t *testing.T) {
	for _, c := range []struct {
		value   string
		want    bool
		wantErr string
	}{
		{"", true, ""},
		{"false", false, ""},
		{"true", true, ""},
		{"off", false, `app setting KARPFUNC_QUOTA_AWARE="off" is not true or false`},
	} {
		d := newDependencies(func(name string) string {
			if name == EnvQuotaAware {
				return c.value
			}
			return ""
		}, nil)
		waits, err := d.waits()
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("%q: error %v; want %q", c.value, err, c.wantErr)
			}
			continue
		}
		if err != nil || waits.quotaAware != c.want {
			t.Errorf("%q: quota aware %t, %v; want %t", c.value, waits.quotaAware, err, c.want)
		}
	}
}
