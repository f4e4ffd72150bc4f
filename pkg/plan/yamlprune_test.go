package plan

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/plan/internal/yamljson"
)

// prunedBoth converts doc with and without the Pruner and prunes both as
// decode does; pruned false when yamljson refused it.
func prunedBoth(t *testing.T, doc []byte) (got, want string, pruned bool) {
	t.Helper()
	full, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	wantJS, _, ok := readPruned(nil, full)
	if !ok {
		t.Fatalf("readPruned refused the whole conversion: %s", full)
	}
	conv := yamljson.Converter{DropManagedFields: true}
	js, ok := conv.ConvertPruned(doc, yamlPrunerFor(doc))
	if !ok {
		return "", string(wantJS), false
	}
	gotJS, _, ok := readPruned(nil, js)
	if !ok {
		t.Fatalf("readPruned refused the pruned conversion: %s", js)
	}
	return string(gotJS), string(wantJS), true
}

// TestYAMLPrunedMatches: every fixture object, as kubectl's YAML, converts
// with its Pruner to JSON that prunes to the same bytes as converting it
// whole.
func TestYAMLPrunedMatches(t *testing.T) {
	for _, obj := range pruneFixture() {
		doc, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if yamlPrunerFor(doc) == nil {
			t.Fatalf("%s: no Pruner for kubectl's YAML", obj.GetName())
		}
		got, want, ok := prunedBoth(t, doc)
		if !ok {
			t.Fatalf("%s: yamljson refused it", obj.GetName())
		}
		if got != want {
			t.Errorf("%s:\npruned while converted: %s\nconverted whole:        %s", obj.GetName(), got, want)
		}
	}
}

// TestYAMLPrunedCases: keys the rule may keep under another spelling,
// annotations whose emptying counts, filtered elements and values on the
// key's line all come out as from converting whole.
func TestYAMLPrunedCases(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"spellings kept", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - Name: c\n    Image: x\n    ENV: []\n    env:\n    - name: A\n      value: b\n"},
		{"last-applied only", "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: |\n      {}\n  name: p\n"},
		{"conditions and volumes", "apiVersion: v1\nkind: Pod\nspec:\n  volumes:\n  - name: a\n    projected:\n      sources: []\n  - name: b\n    persistentVolumeClaim:\n      claimName: b\nstatus:\n  conditions:\n  - type: Ready\n  - type: PodScheduled\n    status: \"False\"\n"},
		{"inline and flow values", "apiVersion: v1\nkind: Pod\nspec:\n  dnsPolicy: ClusterFirst\n  securityContext: {}\n  containers: [{name: c, image: x}]\n  hostAliases:\n  - ip: 1.2.3.4\n"},
		{"node images", "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-1\nstatus:\n  images:\n  - names:\n    - a\n  capacity:\n    cpu: \"2\"\n"},
		{"not a kind it prunes", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  managedFields:\n  - manager: x\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - image: x\n        name: c\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want, ok := prunedBoth(t, []byte(tc.doc))
			if !ok {
				t.Fatalf("yamljson refused it")
			}
			if got != want {
				t.Errorf("\npruned while converted: %s\nconverted whole:        %s", got, want)
			}
		})
	}
}
