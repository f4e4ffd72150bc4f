package plan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// pruneFixture is API-server-shaped objects (managedFields, container
// statuses, probes, env, projected volumes) and pods with what pruning
// must keep: a host port, a claim volume, a resize reported in a status,
// a sidecar, annotations beside kubectl's last-applied one.
func pruneFixture() []client.Object {
	generated := scaletest.Generate(scaletest.Size{Nodes: 6, BoundPods: 120, PendingPods: 20, Seed: 3})
	var out []client.Object
	for _, node := range generated.Nodes {
		node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/app:1"}, SizeBytes: 1 << 20}}
		out = append(out, node)
	}
	for _, claim := range generated.NodeClaims {
		out = append(out, claim)
	}
	for _, pod := range append(generated.BoundPods, generated.PendingPods...) {
		out = append(out, pod)
	}
	base := generated.BoundPods[0]
	special := func(name string, change func(*corev1.Pod)) *corev1.Pod {
		pod := base.DeepCopy()
		pod.Name += "-" + name
		change(pod)
		return pod
	}
	grown := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	always := corev1.ContainerRestartPolicyAlways
	return append(out,
		special("last-applied-only", func(p *corev1.Pod) { p.Annotations = map[string]string{lastAppliedKey: "{}"} }),
		special("last-applied-and-more", func(p *corev1.Pod) {
			p.Annotations = map[string]string{lastAppliedKey: "{}", "karpenter.sh/do-not-disrupt": "true"}
		}),
		special("empty-annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{} }),
		special("hostport", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 9100, HostPort: 9100})
		}),
		special("claim", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
		}),
		special("resized", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: grown}
			p.Status.ContainerStatuses[0].AllocatedResources = grown
		}),
		special("sidecar", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "envoy", RestartPolicy: &always,
				Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Resources: corev1.ResourceRequirements{Requests: grown}}}
		}),
		special("resize-pending", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: "Infeasible"})
		}),
		special("ephemeral", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
		}),
	)
}

const lastAppliedKey = "kubectl.kubernetes.io/last-applied-configuration"

// decodeCompacted decodes js as a fresh object of obj's type and
// compacts it.
func decodeCompacted(t *testing.T, obj client.Object, js []byte) client.Object {
	t.Helper()
	fresh := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if err := json.Unmarshal(js, fresh); err != nil {
		t.Fatalf("%s: %v\n%s", obj.GetName(), err, js)
	}
	var compactor snapshot.Compactor
	compactor.Compact(fresh)
	return fresh
}

// TestPruneKeepsCompacted: an object decoded from its pruned JSON and
// compacted equals the object decoded whole and compacted, and pruning
// drops most of an API-server pod's bytes.
func TestPruneKeepsCompacted(t *testing.T) {
	var whole, pruned int
	for _, obj := range pruneFixture() {
		js, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		meta, ok := quickTypeMeta(js)
		if !ok {
			t.Fatalf("%s: quickTypeMeta refused its JSON", obj.GetName())
		}
		small := prune(nil, js, pruneRuleFor(apiGroup(meta.APIVersion), meta.Kind))
		if !json.Valid(small) {
			t.Fatalf("%s: pruned JSON is not valid: %s", obj.GetName(), small)
		}
		full, cut := decodeCompacted(t, obj, js), decodeCompacted(t, obj, small)
		if !reflect.DeepEqual(full, cut) {
			t.Errorf("%s %s: pruning changed the compacted object\nwhole:  %+v\npruned: %+v", meta.Kind, obj.GetName(), full, cut)
		}
		if meta.Kind == "Pod" {
			whole += len(js)
			pruned += len(small)
		}
	}
	if pruned*2 > whole {
		t.Errorf("pruning kept %d of %d bytes of the pods; want at most half", pruned, whole)
	}
}

// TestPruneCases: field spellings encoding/json would match are kept,
// and input that is not compact JSON is left whole.
func TestPruneCases(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"keep list folds case", `{"spec":{"containers":[{"Name":"c","RESOURCES":{},"env":[]}]}}`, `{"spec":{"containers":[{"Name":"c","RESOURCES":{}}]}}`},
		{"escaped key kept", `{"spec":{"containers":[{"n\u0061me":"c","image":"x"}]}}`, `{"spec":{"containers":[{"n\u0061me":"c"}]}}`},
		{"drop list is exact", `{"metadata":{"ManagedFields":[],"managedFields":[],"name":"a"}}`, `{"metadata":{"ManagedFields":[],"name":"a"}}`},
		{"volumes without a claim", `{"spec":{"volumes":[{"name":"a","projected":{}},{"name":"b","persistentVolumeClaim":{"claimName":"b"}},{"name":"c","ephemeral":{}}]}}`,
			`{"spec":{"volumes":[{"name":"b","persistentVolumeClaim":{"claimName":"b"}},{"name":"c","ephemeral":{}}]}}`},
		{"annotations emptied go", `{"metadata":{"annotations":{"` + lastAppliedKey + `":"{}"},"name":"a"}}`, `{"metadata":{"name":"a"}}`},
		{"empty annotations stay", `{"metadata":{"annotations":{},"name":"a"}}`, `{"metadata":{"annotations":{},"name":"a"}}`},
		{"null and odd values", `{"spec":{"containers":null,"volumes":[null,1]},"status":null}`, `{"spec":{"containers":null,"volumes":[null,1]},"status":null}`},
		{"conditions a pass reads", `{"status":{"conditions":[{"type":"Ready"},{"status":"True","type":"PodScheduled"},{"Type":"Ready"},{"type":"PodResizePending"},{"type":1},{"type":"Initialized"}]}}`,
			`{"status":{"conditions":[{"status":"True","type":"PodScheduled"},{"Type":"Ready"},{"type":"PodResizePending"},{"type":1}]}}`},
		{"not compact", `{"spec": {"containers": [{"image": "x"}]}}`, `{"spec": {"containers": [{"image": "x"}]}}`},
		{"strings with brackets", `{"metadata":{"name":"a]}\"{"},"spec":{"containers":[{"name":"[","args":["}"]}]}}`, `{"metadata":{"name":"a]}\"{"},"spec":{"containers":[{"name":"["}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(prune(nil, []byte(tc.in), podRule)); got != tc.want {
				t.Errorf("prune(%s)\n= %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestPruneKeepsPlan: the plan and the disruption moves from reading a
// kubectl-shaped JSON List (pruned) equal those from the same objects
// compacted whole.
func TestPruneKeepsPlan(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	generated := scaletest.Generate(scaletest.Size{Nodes: 30, BoundPods: 900, PendingPods: 120, Seed: 7})
	var dump bytes.Buffer
	if err := generated.WriteJSONList(&dump); err != nil {
		t.Fatal(err)
	}
	read := &Objects{}
	if err := read.Read("cluster.json", &dump); err != nil {
		t.Fatal(err)
	}
	whole := snapshot.Cluster{NodePools: generated.NodePools, NodeClasses: generated.NodeClasses}
	var compactor snapshot.Compactor
	for _, node := range generated.Nodes {
		compactor.Compact(node)
		whole.Nodes = append(whole.Nodes, node)
	}
	for _, claim := range generated.NodeClaims {
		compactor.Compact(claim)
		whole.NodeClaims = append(whole.NodeClaims, claim)
	}
	for _, pod := range append(generated.BoundPods, generated.PendingPods...) {
		compactor.Compact(pod)
		whole.Pods = append(whole.Pods, pod)
	}
	for name, decide := range map[string]func(snapshot.Cluster) string{
		"solve": func(c snapshot.Cluster) string { return solveJSON(t, c, cat) },
		"disruption": func(c snapshot.Cluster) string {
			return disruptionJSON(t, c, cat)
		},
	} {
		want, got := decide(whole), decide(read.Cluster)
		if want != got {
			t.Errorf("%s: reading the pruned dump changed the decision\nwhole:  %s\npruned: %s", name, want, got)
		}
		if len(want) < 100 || !strings.Contains(want, "-") {
			t.Errorf("%s: the decision is empty (%q), so the comparison proves nothing", name, want)
		}
	}
}

func solveJSON(t *testing.T, cluster snapshot.Cluster, cat *catalog.Catalog) string {
	t.Helper()
	var out bytes.Buffer
	if err := NewOutput(scheduler.Solve(cluster.Input(cat, snapshot.Offline)), 0).WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func disruptionJSON(t *testing.T, cluster snapshot.Cluster, cat *catalog.Catalog) string {
	t.Helper()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	moves, before, last := disruption.Replay(disruption.State{Cluster: &cluster, Catalog: cat, Now: now}, 5)
	var out bytes.Buffer
	if err := NewDisruptionOutput(moves, before, last).WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
