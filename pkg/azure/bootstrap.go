package azure

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// BootstrapVersion is the version of the Bootstrap document this package
// writes. DecodeBootstrap rejects other versions instead of guessing.
const BootstrapVersion = "karpfunc.azure/v1"

// Bootstrap is what a new VM needs to know to join the cluster as the node
// Karpenter expects: its labels, taints, pod limit and cluster.
//
// It travels in osProfile.customData as base64 of this JSON document. This is
// the development/emulator contract: in production AKS node bootstrapping
// (the node image's provisioning scripts fed by AKS's bootstrap data, as the
// Azure Karpenter provider generates it) replaces it, and the same labels,
// taints and max-pods go into kubelet flags instead.
type Bootstrap struct {
	Version     string            `json:"version"`
	ClusterName string            `json:"clusterName"`
	NodeName    string            `json:"nodeName,omitempty"`
	MaxPods     int32             `json:"maxPods,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Taints      []corev1.Taint    `json:"taints,omitempty"`
}

// EncodeBootstrap renders b as the base64 customData ARM expects. The
// version is filled in if empty.
func EncodeBootstrap(b Bootstrap) (string, error) {
	if b.Version == "" {
		b.Version = BootstrapVersion
	}
	if b.Version != BootstrapVersion {
		return "", NewInvalidRequestError("bootstrap version %q is not %q", b.Version, BootstrapVersion)
	}
	if b.ClusterName == "" {
		return "", NewInvalidRequestError("bootstrap has no cluster name")
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("encoding bootstrap: %w", err)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

// DecodeBootstrap parses customData written by EncodeBootstrap.
func DecodeBootstrap(customData string) (*Bootstrap, error) {
	raw, err := base64.StdEncoding.DecodeString(customData)
	if err != nil {
		return nil, NewInvalidRequestError("bootstrap customData is not base64: %v", err)
	}
	var b Bootstrap
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, NewInvalidRequestError("bootstrap customData is not a JSON document: %v", err)
	}
	if b.Version != BootstrapVersion {
		return nil, NewInvalidRequestError("bootstrap version %q is not supported (want %q)", b.Version, BootstrapVersion)
	}
	return &b, nil
}
