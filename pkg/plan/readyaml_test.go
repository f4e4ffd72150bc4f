package plan

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/plan/internal/yamljson"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

// TestYAMLListTakesFastPath: every item of a cluster written as `kubectl
// get -o yaml` prints it (API-server-shaped pods with managedFields,
// pending pods with their PodScheduled message, nodes, NodeClaims) is
// converted by yamljson, never left to sigs.k8s.io/yaml, which is ten
// times slower.
func TestYAMLListTakesFastPath(t *testing.T) {
	generated := scaletest.Generate(scaletest.Size{Nodes: 10, BoundPods: 300, PendingPods: 40, Seed: 11})
	var dump bytes.Buffer
	if err := generated.WriteYAMLList(&dump); err != nil {
		t.Fatal(err)
	}
	var units []*decodeUnit
	if err := splitYAMLStream("cluster.yaml", bufio.NewReader(&dump), func(unit *decodeUnit) { units = append(units, unit) }); err != nil {
		t.Fatal(err)
	}
	if want := len(generated.Objects()); len(units) != want {
		t.Fatalf("split %d items, want %d", len(units), want)
	}
	var conv yamljson.Converter
	for _, unit := range units {
		if _, ok := conv.Convert(unit.raw); !ok {
			t.Errorf("item %d goes the slow way:\n%s", unit.item, unit.raw)
		}
	}
}
