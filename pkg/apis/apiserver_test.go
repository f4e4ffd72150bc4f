package apis_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// TestAKSNodeClassNAPManifests sends NAP users' AKSNodeClass manifests to a
// real API server without strict field validation (what kubectl apply
// --validate=false and most clients do), so a field missing from the schema
// would be pruned silently. Each must be accepted with every field kept, or
// refused with the message that names the field.
func TestAKSNodeClassNAPManifests(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true})
	kube := testenv.Client(t, cp.RESTConfig())

	for _, tc := range []struct {
		name    string
		spec    map[string]any
		refusal string // "" = accepted and stored as sent
	}{
		{name: "fips", spec: map[string]any{"fipsMode": "FIPS"},
			refusal: "spec.fipsMode: FIPS is not supported by karpfunc"},
		{name: "fips-disabled", spec: map[string]any{"fipsMode": "Disabled"}},
		{name: "encryption-at-host", spec: map[string]any{"security": map[string]any{"encryptionAtHost": true}}},
		{name: "trusted-launch", spec: map[string]any{"security": map[string]any{"trustedLaunch": map[string]any{"vtpm": true}}},
			refusal: "spec.security.trustedLaunch: Trusted Launch (vtpm, secureBoot) is not supported"},
		{name: "trusted-launch-off", spec: map[string]any{"security": map[string]any{"trustedLaunch": map[string]any{"vtpm": false, "secureBoot": false}}}},
		{name: "local-dns", spec: map[string]any{"localDNS": map[string]any{"mode": "Required"}},
			refusal: "spec.localDNS is not supported"},
		{name: "artifact-streaming", spec: map[string]any{"artifactStreaming": map[string]any{"enabled": true}},
			refusal: "spec.artifactStreaming: artifact streaming is not supported"},
		{name: "gpu-driver", spec: map[string]any{"gpu": map[string]any{"mode": "Driver"}}},
		{name: "gpu-none", spec: map[string]any{"gpu": map[string]any{"mode": "None"}}},
		{name: "sysctls", spec: map[string]any{"linuxOSConfig": map[string]any{"sysctls": map[string]any{
			"vmMaxMapCount": int64(262144), "netIPv4TCPTwReuse": true, "netIPv4IPLocalPortRange": "32768 65535"}}}},
		{name: "sysctl-out-of-range", spec: map[string]any{"linuxOSConfig": map[string]any{"sysctls": map[string]any{"vmMaxMapCount": int64(1)}}},
			refusal: "spec.linuxOSConfig.sysctls.vmMaxMapCount"},
		{name: "port-range", spec: map[string]any{"linuxOSConfig": map[string]any{"sysctls": map[string]any{"netIPv4IPLocalPortRange": "70000 80000"}}},
			refusal: "netIPv4IPLocalPortRange must be"},
		{name: "transparent-huge-pages", spec: map[string]any{"linuxOSConfig": map[string]any{"transparentHugePageEnabled": "never"}},
			refusal: "spec.linuxOSConfig.transparentHugePageEnabled is not supported"},
		{name: "swap", spec: map[string]any{"linuxOSConfig": map[string]any{"swapFileSize": "2Gi"}, "kubelet": map[string]any{"failSwapOn": false}},
			refusal: "spec.linuxOSConfig.swapFileSize: swap files are not supported"},
		{name: "fail-swap-on-false", spec: map[string]any{"kubelet": map[string]any{"failSwapOn": false}},
			refusal: "spec.kubelet.failSwapOn: false is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
				"metadata": map[string]any{"name": tc.name},
				"spec":     tc.spec,
			}}
			checkRefusedAgrees(t, tc.spec, tc.refusal)
			err := kube.Create(t.Context(), obj)
			if tc.refusal != "" {
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("create error = %v; want Invalid naming %q", err, tc.refusal)
				}
				if strings.Contains(err.Error(), "Invalid value: \"string\"") || strings.Contains(err.Error(), "in body must be of type") {
					t.Fatalf("refused with a type error, not the field's message: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("create rejected: %v", err)
			}
			got := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass"}}
			if err := kube.Get(t.Context(), client.ObjectKey{Name: tc.name}, got); err != nil {
				t.Fatal(err)
			}
			assertKept(t, "spec", tc.spec, got.Object["spec"])
		})
	}
}

// assertKept fails when a value sent is missing or changed in what the API
// server stored (extra defaulted fields are fine).
func assertKept(t *testing.T, path string, sent, stored any) {
	t.Helper()
	if m, ok := sent.(map[string]any); ok {
		sm, ok := stored.(map[string]any)
		if !ok {
			t.Fatalf("%s: stored %v, sent an object", path, stored)
		}
		for k, v := range m {
			if _, ok := sm[k]; !ok {
				t.Fatalf("%s.%s was pruned by the API server", path, k)
			}
			assertKept(t, path+"."+k, v, sm[k])
		}
		return
	}
	if sent != stored {
		t.Fatalf("%s: stored %v (%T), sent %v (%T)", path, stored, stored, sent, sent)
	}
}

// checkRefusedAgrees: v1beta1's Refused, which plan uses on files that never
// reach an API server, names the same field the CEL rule does.
func checkRefusedAgrees(t *testing.T, spec map[string]any, refusal string) {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var typed v1beta1.AKSNodeClassSpec
	if err := json.Unmarshal(raw, &typed); err != nil {
		t.Fatal(err)
	}
	got := typed.Refused()
	byName := strings.HasPrefix(refusal, "spec.") && strings.Contains(refusal, "not supported")
	if !byName {
		if refusal == "" && len(got) > 0 {
			t.Fatalf("Refused() = %v for a spec the API server accepts", got)
		}
		return
	}
	path, _, _ := strings.Cut(refusal, " ")
	path = strings.TrimSuffix(path, ":")
	if !slices.Contains(got, path) {
		t.Fatalf("Refused() = %v; the CEL rule refuses %s", got, path)
	}
}
