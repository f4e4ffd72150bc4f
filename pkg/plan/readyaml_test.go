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

// TestPlainItemLineMatches: every line plainItemLine takes, it takes as
// anyItemLine would.
func TestPlainItemLineMatches(t *testing.T) {
	lines := []string{"  a: b\n", "   a: b\n", "    - x\n", " a\n", "  # c\n", "  \t#c\n", "  \u00a0\n", "  \u0085x\n", "\n", "  \n",
		"- a\n", "  - a\n", "a: b\n", "  ~\n", "  \"q\"\n", "   x", "  é\n"}
	taken := 0
	for _, indent := range []int{0, 2} {
		for _, line := range lines {
			fast := &yamlSplitter{inItems: true, started: true, indent: indent}
			if !fast.plainItemLine([]byte(line)) {
				continue
			}
			taken++
			slow := &yamlSplitter{inItems: true, started: true, indent: indent}
			slow.anyItemLine([]byte(line))
			if fast.item.String() != slow.item.String() || !slow.inItems {
				t.Errorf("indent %d, line %q: plainItemLine wrote %q, anyItemLine %q (still in items: %v)", indent, line, fast.item.String(), slow.item.String(), slow.inItems)
			}
		}
	}
	if taken < 6 {
		t.Errorf("plainItemLine took %d lines; the test proves little", taken)
	}
}
