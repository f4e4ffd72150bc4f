package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/gpu"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/plan/plantest"
)

// TestPlanGPUMode: spec.gpu.mode decides which GPU sizes a pod may get, as
// in the Azure provider. A pod that limits amd.com/gpu is unschedulable
// under Driver (unset or explicit: AKS installs no AMD driver) and gets an
// AMD size under None, the unschedulable reason naming the mode; a pod that limits nvidia.com/gpu gets an NVIDIA size
// under every mode.
func TestPlanGPUMode(t *testing.T) {
	const pool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: any}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: %s
---
`
	for _, tc := range []struct {
		spec, resource, maker string // maker "" means unschedulable
	}{
		{`{}`, "amd.com/gpu", ""},
		{`{gpu: {mode: Driver}}`, "amd.com/gpu", ""},
		{`{gpu: {mode: None}}`, "amd.com/gpu", gpu.AMD},
		{`{}`, "nvidia.com/gpu", gpu.NVIDIA},
		{`{gpu: {mode: None}}`, "nvidia.com/gpu", gpu.NVIDIA},
	} {
		file := filepath.Join(t.TempDir(), "dump.yaml")
		input := fmt.Sprintf(pool, tc.spec) + plantest.PodWithResources(`{limits: {`+tc.resource+`: "1"}}`)
		if err := os.WriteFile(file, []byte(input), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		// eastus2 offers both makers' sizes (MI300X among them).
		if err := runPlanTo(&out, []string{"-f", file, "--region", "eastus2", "-o", "json"}); err != nil {
			t.Fatal(err)
		}
		var got plan.Output
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		name := tc.spec + " " + tc.resource
		if tc.maker == "" {
			if len(got.NodeClaims) != 0 || len(got.Unschedulable) != 1 {
				t.Errorf("%s: nodeClaims %+v, unschedulable %+v; want the pod unschedulable", name, got.NodeClaims, got.Unschedulable)
			} else if reason := got.Unschedulable[0].Reason; !strings.Contains(reason, "spec.gpu.mode is Driver; set spec.gpu.mode to None") {
				t.Errorf("%s: unschedulable because %q; want the reason to name spec.gpu.mode", name, reason)
			}
			continue
		}
		if len(got.NodeClaims) != 1 {
			t.Fatalf("%s: nodeClaims %+v, unschedulable %+v; want one NodeClaim", name, got.NodeClaims, got.Unschedulable)
		}
		size := got.NodeClaims[0].InstanceType
		if sku, ok := gpu.Lookup(size); !ok || sku.Manufacturer != tc.maker {
			t.Errorf("%s: planned on %s (%+v); want a %s GPU size", name, size, sku, tc.maker)
		}
	}
}
