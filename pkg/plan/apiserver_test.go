package plan_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/plan/plantest"
)

// objectsOf decodes a YAML stream into objects, a List's items one by one.
func objectsOf(t *testing.T, input string) []*unstructured.Unstructured {
	t.Helper()
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(input), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.IsList() {
			if err := obj.EachListItem(func(item runtime.Object) error {
				out = append(out, item.(*unstructured.Unstructured))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		out = append(out, obj)
	}
}

// TestReadAgreesWithTheAPIServer holds plan's checks and defaulting to
// the real thing: every bad input plan refuses, a kube-apiserver (with
// Karpenter's CRDs) refuses too, for the field plan names; and the pod
// with limits only is stored with the requests plan gives it.
func TestReadAgreesWithTheAPIServer(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := context.Background()
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}); err != nil {
		t.Fatal(err)
	}
	// Without kube-controller-manager nobody creates the default
	// ServiceAccount that pod admission requires.
	for _, ns := range []string{"ns", "kube-system"} {
		if err := kube.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range plantest.BadInputs {
		t.Run(tc.Name, func(t *testing.T) {
			var refusals []string
			for _, obj := range objectsOf(t, tc.Input) {
				if err := kube.Create(ctx, obj, client.DryRunAll); err != nil {
					refusals = append(refusals, err.Error())
				}
			}
			if len(refusals) == 0 {
				t.Fatalf("the API server accepts what plan refuses")
			}
			if !strings.Contains(strings.Join(refusals, "\n"), tc.APIServer) {
				t.Errorf("the API server refuses with\n%s\nwant it to contain %q", strings.Join(refusals, "\n"), tc.APIServer)
			}
		})
	}

	t.Run("requests defaulted from limits", func(t *testing.T) {
		input := plantest.PodWithResources(`{requests: {cpu: 500m}, limits: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}`)
		objs := objectsOf(t, input)
		if err := kube.Create(ctx, objs[0], client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		stored := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, stored); err != nil {
			t.Fatal(err)
		}
		read := &plan.Objects{}
		if err := read.Read("f.yaml", bytes.NewReader([]byte(input))); err != nil {
			t.Fatal(err)
		}
		want, got := resources.RequestsForPods(stored), resources.RequestsForPods(read.Pods[0])
		if !equalLists(got, want) {
			t.Errorf("plan reads requests %v; the API server stores %v", got, want)
		}
	})
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, quantity := range a {
		if other, ok := b[name]; !ok || other.Cmp(quantity) != 0 {
			return false
		}
	}
	return true
}
