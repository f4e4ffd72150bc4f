package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/plan/plantest"
)

// TestPlanRefusesBadInput: `karpfunc plan -f FILE` refuses each object the
// API server would refuse, naming the file, document, object and field,
// and prints no plan.
func TestPlanRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range plantest.BadInputs {
		t.Run(tc.Name, func(t *testing.T) {
			file := filepath.Join(dir, "f.yaml")
			if err := os.WriteFile(file, []byte(tc.Input), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := runPlanTo(&out, []string{"-f", file, "--region", "eastus"})
			if err == nil {
				t.Fatalf("plan accepted it and printed:\n%s", out.String())
			}
			for _, want := range tc.Want {
				want = strings.Replace(want, "f.yaml", file, 1)
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q\nwant it to contain %q", err, want)
				}
			}
			if out.Len() > 0 {
				t.Errorf("printed a plan for refused input:\n%s", out.String())
			}
		})
	}
}

// TestPlanLimitsOnlyGPU: a pod whose container gives only
// limits: {nvidia.com/gpu: 1} asks for a GPU (the API server defaults its
// requests to its limits), so plan places it on a GPU size; without the
// limit the same pod lands on a size with none.
func TestPlanLimitsOnlyGPU(t *testing.T) {
	pool := `apiVersion: karpenter.sh/v1
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
spec: {imageFamily: Ubuntu2204}
---
`
	for _, tc := range []struct {
		limits string
		gpu    bool
	}{
		{`{cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}`, true},
		{`{cpu: "1", memory: 1Gi}`, false},
	} {
		file := filepath.Join(t.TempDir(), "dump.yaml")
		if err := os.WriteFile(file, []byte(pool+plantest.PodWithResources("{limits: "+tc.limits+"}")), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := runPlanTo(&out, []string{"-f", file, "--region", "eastus", "-o", "json"}); err != nil {
			t.Fatal(err)
		}
		var got plan.Output
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if len(got.NodeClaims) != 1 {
			t.Fatalf("limits %s: nodeClaims %+v, unschedulable %+v; want one NodeClaim", tc.limits, got.NodeClaims, got.Unschedulable)
		}
		// Azure's GPU sizes are the N series (Standard_NC..., ND..., NV...).
		if isGPU := strings.HasPrefix(got.NodeClaims[0].InstanceType, "Standard_N"); isGPU != tc.gpu {
			t.Errorf("limits %s: planned on %s; want a GPU size: %v", tc.limits, got.NodeClaims[0].InstanceType, tc.gpu)
		}
	}
}
