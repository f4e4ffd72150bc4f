package plan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

// BenchmarkRead5000Pods: reading a 5,000-pod dump (YAML documents with
// labels, requests, node affinity and spread), what `karpfunc plan` does
// before it solves.
func BenchmarkRead5000Pods(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; i < 5000; i++ {
		y, err := yaml.Marshal(benchPod(i))
		if err != nil {
			b.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	benchmarkRead(b, "dump.yaml", buf.Bytes(), 5000)
}

// BenchmarkReadList10000Pods: the same pods, 10,000 of them, as one kind:
// List the way `kubectl get pods -o json` and `-o yaml` print it.
func BenchmarkReadList10000Pods(b *testing.B) {
	list := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]string{"resourceVersion": ""}}
	var items []any
	for i := 0; i < 10000; i++ {
		items = append(items, benchPod(i))
	}
	list["items"] = items
	b.Run("json", func(b *testing.B) {
		js, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			b.Fatal(err)
		}
		benchmarkRead(b, "dump.json", js, 10000)
	})
	b.Run("yaml", func(b *testing.B) {
		y, err := yaml.Marshal(list)
		if err != nil {
			b.Fatal(err)
		}
		benchmarkRead(b, "dump.yaml", y, 10000)
	})
}

func benchmarkRead(b *testing.B, name string, data []byte, wantPods int) {
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o := &plan.Objects{}
		if err := o.Read(name, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		if len(o.Pods) != wantPods {
			b.Fatalf("read %d pods, want %d", len(o.Pods), wantPods)
		}
	}
}

// benchPod is a pod with labels, requests, node affinity and spread.
func benchPod(i int) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "default", Labels: map[string]string{"app": fmt.Sprintf("a%d", i%50), "tier": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+i%1900)), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 128+i%4000))}}}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}}}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("a%d", i%50)}}}},
		},
	}
}

// BenchmarkReadAPIServerList: a cluster shaped as the API server returns
// it (hack/scaledump's generator at 100 nodes, 3,000 bound and 100 pending
// pods: managedFields, container statuses, probes, env, projected
// volumes), as `kubectl get -o json` and `-o yaml` print it.
func BenchmarkReadAPIServerList(b *testing.B) {
	generated := scaletest.Generate(scaletest.Size{Nodes: 100, BoundPods: 3000, PendingPods: 100, Seed: 20})
	for _, format := range []struct {
		name  string
		write func(io.Writer) error
	}{{"json", generated.WriteJSONList}, {"yaml", generated.WriteYAMLList}} {
		b.Run(format.name, func(b *testing.B) {
			var dump bytes.Buffer
			if err := format.write(&dump); err != nil {
				b.Fatal(err)
			}
			benchmarkRead(b, "cluster."+format.name, dump.Bytes(), 3100)
		})
	}
}
