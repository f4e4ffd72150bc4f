package main

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// planNodePool is a NodePool and AKSNodeClass as NAP users write them.
const planNodePool = `# general-purpose D-series amd64 Linux nodes, spot or on-demand
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.azure.com
        kind: AKSNodeClass
        name: default
      expireAfter: 720h
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: karpenter.azure.com/sku-family
          operator: In
          values: ["D"]
        - key: karpenter.azure.com/sku-cpu
          operator: Lt
          values: ["33"]
  limits:
    cpu: "1000"
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata:
  name: default
spec:
  imageFamily: Ubuntu2204
  osDiskSizeGB: 128
`

// diversePodsYAML is Karpenter's scheduling benchmark workload ("diverse
// pods": generic, zone and hostname spread, zone affinity, hostname
// anti-affinity, in fifths) as `kubectl get -o yaml` would print it.
func diversePodsYAML(tb testing.TB, count int) []byte {
	rng := rand.New(rand.NewSource(42)) //nolint:gosec // deterministic workload
	value := func() string { return []string{"a", "b", "c", "d", "e", "f", "g"}[rng.Intn(7)] }
	seq := 0
	pod := func(labels map[string]string) *corev1.Pod {
		seq++
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%06d", seq), Namespace: "default", Labels: labels, UID: types.UID(fmt.Sprint(seq))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(fmt.Sprintf("%dm", []int{100, 250, 500, 1000, 1500}[rng.Intn(5)])),
				corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", []int{100, 256, 512, 1024, 2048, 4096}[rng.Intn(6)])),
			}}}}},
		}
	}
	term := func(labels map[string]string, key string) []corev1.PodAffinityTerm {
		return []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: key}}
	}
	var pods []*corev1.Pod
	n := count / 5
	for range n {
		pods = append(pods, pod(map[string]string{"my-label": value()}))
	}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelHostname} {
		for range n {
			p := pod(map[string]string{"my-label": value()})
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"my-label": value()}}}}
			pods = append(pods, p)
		}
	}
	for range n {
		labels := map[string]string{"my-affinity": value()}
		p := pod(labels)
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term(labels, corev1.LabelTopologyZone)}}
		pods = append(pods, p)
	}
	for range count - len(pods) {
		labels := map[string]string{"app": "nginx"}
		p := pod(labels)
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term(labels, corev1.LabelHostname)}}
		pods = append(pods, p)
	}
	var buf bytes.Buffer
	buf.WriteString(planNodePool)
	for _, p := range pods {
		y, err := yaml.Marshal(p)
		if err != nil {
			tb.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	return buf.Bytes()
}

// BenchmarkPlan5000 is the whole of `karpfunc plan -f dump.yaml` on
// Karpenter's 5,000-pod benchmark workload against the embedded eastus
// catalog: read the YAML, load the catalog, solve, print the table.
func BenchmarkPlan5000(b *testing.B) {
	file := filepath.Join(b.TempDir(), "dump.yaml")
	data := diversePodsYAML(b, 5000)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out.Reset()
		if err := runPlanTo(&out, []string{"-f", file}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if !strings.Contains(out.String(), "5000 pending") {
		b.Fatalf("the plan does not account for 5000 pending pods:\n%s", tail(out.String()))
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}
