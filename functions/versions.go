package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
)

// KubernetesVersionTTL is how long the API server's version is kept
// before it is read again: the Azure provider's KubernetesVersionTTL
// (Azure/karpenter-provider-azure pkg/cache/cache.go, 15 minutes). A
// control-plane upgrade reaches launches and drift within it.
const KubernetesVersionTTL = 15 * time.Minute

// kubernetesVersion is the cluster's Kubernetes version nodes run: the
// app setting KUBERNETES_VERSION when set (a change restarts the app),
// otherwise the API server's version, cached for KubernetesVersionTTL in
// the warm instance (when a read fails, the last version read is used).
type kubernetesVersion struct {
	setting string
	disco   discovery.ServerVersionInterface
	now     func() time.Time

	mu      sync.Mutex
	version string
	until   time.Time
}

// Get returns the version without a leading "v" ("1.34.1").
func (k *kubernetesVersion) Get(ctx context.Context) (string, error) {
	if k.setting != "" {
		return strings.TrimPrefix(k.setting, "v"), nil
	}
	return k.ControlPlane(ctx)
}

// Status returns the nodes' and the control plane's versions, for
// AKSNodeClass status (nodepoolstatus.ClassOptions.Versions).
func (k *kubernetesVersion) Status(ctx context.Context) (node, controlPlane string, err error) {
	if controlPlane, err = k.ControlPlane(ctx); err != nil {
		return "", "", err
	}
	if node, err = k.Get(ctx); err != nil {
		return "", "", err
	}
	return node, controlPlane, nil
}

// ControlPlane returns the API server's version without a leading "v",
// cached for KubernetesVersionTTL.
func (k *kubernetesVersion) ControlPlane(context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.version != "" && k.now().Before(k.until) {
		return k.version, nil
	}
	v, err := k.disco.ServerVersion()
	if err != nil && k.version != "" {
		return k.version, nil // the last version read beats no launch; the next call reads again
	}
	if err != nil {
		return "", err
	}
	k.version, k.until = strings.TrimPrefix(v.GitVersion, "v"), k.now().Add(KubernetesVersionTTL)
	return k.version, nil
}
