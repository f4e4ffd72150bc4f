package plan_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/plan/plantest"
)

func TestReadRefusesWhatTheAPIServerRefuses(t *testing.T) {
	for _, tc := range plantest.BadInputs {
		t.Run(tc.Name, func(t *testing.T) {
			err := (&plan.Objects{}).Read("f.yaml", strings.NewReader(tc.Input))
			var invalid *plan.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("err = %v, want an InvalidError", err)
			}
			for _, want := range tc.Want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q\nwant it to contain %q", err, want)
				}
			}
		})
	}
}

// TestReadDefaultsRequestsToLimits: a container's limits stand for its
// requests where it has none, as the API server stores a pod (k8s.io/
// kubernetes pkg/apis/core/v1/defaults.go SetDefaults_Pod); requests it
// has stay; pods sharing the same containers share the defaulted ones.
func TestReadDefaultsRequestsToLimits(t *testing.T) {
	two := plantest.PodWithResources(`{requests: {cpu: 500m}, limits: {cpu: "1", nvidia.com/gpu: "1"}}`)
	input := two + "---\n" + strings.Replace(two, "name: p,", "name: q,", 1) +
		"---\napiVersion: v1\nkind: Pod\nmetadata: {name: init, namespace: ns}\nspec: {initContainers: [{name: i, resources: {limits: {memory: 1Gi}}}], containers: [{name: c}]}\n"
	o := &plan.Objects{}
	if err := o.Read("f.yaml", strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	if len(o.Pods) != 3 {
		t.Fatalf("read %d pods, want 3", len(o.Pods))
	}
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), "nvidia.com/gpu": resource.MustParse("1")}
	for _, p := range o.Pods[:2] {
		got := p.Spec.Containers[0].Resources.Requests
		if len(got) != len(want) || !got.Cpu().Equal(want[corev1.ResourceCPU]) || !got.Name("nvidia.com/gpu", resource.DecimalSI).Equal(want["nvidia.com/gpu"]) {
			t.Errorf("pod %s requests %v, want %v (cpu as requested, the GPU from its limit)", p.Name, got, want)
		}
	}
	if got := o.Pods[2].Spec.InitContainers[0].Resources.Requests.Memory(); got.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("init container requests memory %v, want 1Gi from its limit", got)
	}
}
