package main

import (
	"strings"
	"testing"
	"time"
)

// TestParseDemoFlags: settings that go together are read as written; the
// ones that do not are refused naming the flag at fault.
func TestParseDemoFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    demoFlags
		wantErr string // a substring of the error; empty: no error
	}{
		{
			name: "defaults: the sample workload",
			want: demoFlags{timeout: 10 * time.Minute, vmCreate: demoVMCreate, boot: demoBoot},
		},
		{
			name: "burst through a Deployment",
			args: []string{"-pods", "1000", "-trace"},
			want: demoFlags{timeout: 10 * time.Minute, vmCreate: demoVMCreate, boot: demoBoot, pods: 1000, trace: true},
		},
		{
			name: "burst of bare pods",
			args: []string{"-pods", "100", "-bare-pods"},
			want: demoFlags{timeout: 10 * time.Minute, vmCreate: demoVMCreate, boot: demoBoot, pods: 100, barePods: true},
		},
		{
			name: "another NodePool file",
			args: []string{"-nodepool", "examples/nodepool-arm64.yaml"},
			want: demoFlags{timeout: 10 * time.Minute, vmCreate: demoVMCreate, boot: demoBoot, nodePool: "examples/nodepool-arm64.yaml"},
		},
		{name: "bare pods without -pods", args: []string{"-bare-pods"}, wantErr: "-bare-pods needs -pods N"},
		{name: "bare pods with -pods 0", args: []string{"-pods", "0", "-bare-pods"}, wantErr: "-bare-pods needs -pods N"},
		{name: "negative pods", args: []string{"-pods", "-1"}, wantErr: "-pods -1"},
		{name: "too many pods", args: []string{"-pods", "5001", "-bare-pods"}, wantErr: "-pods 5001"},
		{name: "unknown flag", args: []string{"-bare"}, wantErr: "-bare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDemoFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Errorf("flags %+v; want %+v", got, tc.want)
			}
		})
	}
}
