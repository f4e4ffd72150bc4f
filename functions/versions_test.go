package main

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
)

// serverVersion is the API server's /version answer.
type serverVersion struct{ git string }

func (s *serverVersion) ServerVersion() (*version.Info, error) {
	return &version.Info{GitVersion: s.git}, nil
}

// TestKubernetesVersionStatus: AKSNodeClass status compares the nodes'
// version (the setting when set) with the control plane's, and a warm
// instance sees a control-plane upgrade once the cached read expires.
func TestKubernetesVersionStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	server := &serverVersion{git: "v1.33.2"}
	for _, tc := range []struct {
		name, setting, wantNode string
	}{
		{"nodes follow the API server", "", "1.34.1"},
		{"nodes pinned by KUBERNETES_VERSION", "v1.33.2", "1.33.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server.git = "v1.33.2"
			kv := &kubernetesVersion{setting: tc.setting, disco: server, now: func() time.Time { return now }}
			if _, cp, err := kv.Status(context.Background()); err != nil || cp != "1.33.2" {
				t.Fatalf("control plane = %q, %v; want 1.33.2", cp, err)
			}
			server.git = "v1.34.1" // upgraded
			now = now.Add(KubernetesVersionTTL + time.Second)
			node, cp, err := kv.Status(context.Background())
			if err != nil || cp != "1.34.1" || node != tc.wantNode {
				t.Errorf("after the upgrade: node %q, control plane %q, %v; want node %s, control plane 1.34.1", node, cp, err, tc.wantNode)
			}
		})
	}
}
