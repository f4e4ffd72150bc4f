package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

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

// TestSplitterDropsManagedFields: an item's metadata.managedFields as
// kubectl prints it is left out by the splitter, and the rest converts as
// the whole item does; managedFields anywhere else, written another way,
// or under metadata indented otherwise, stays.
func TestSplitterDropsManagedFields(t *testing.T) {
	for _, tc := range []struct {
		name, item string
		dropped    bool
	}{
		{"kubectl", "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    a: b\n  managedFields:\n  - apiVersion: v1\n    fieldsV1:\n      f:metadata: {}\n\n    manager: m\n  - manager: k\n  name: p\nspec: {}\n", true},
		{"last key of metadata", "kind: Pod\nmetadata:\n  name: p\n  managedFields:\n  - manager: m\nspec:\n  nodeName: n1\n", true},
		{"deeper sequence", "metadata:\n  managedFields:\n    - manager: m\n  name: p\n", true},
		{"block scalar before it", "metadata:\n  annotations:\n    note: |+\n      text\n  managedFields:\n  - manager: m\n\n  name: p\n", true},
		{"inline value", "metadata:\n  managedFields: []\n  name: p\n", false},
		{"under spec", "metadata:\n  name: p\nspec:\n  managedFields:\n  - manager: m\n", false},
		{"metadata indented four", "metadata:\n    name: p\n    managedFields:\n    - manager: m\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.SplitAfter(strings.TrimSuffix(tc.item, "\n"), "\n")
			var list strings.Builder
			list.WriteString("apiVersion: v1\nkind: List\nitems:\n")
			for i, line := range lines {
				prefix := "  "
				if i == 0 {
					prefix = "- "
				}
				if line == "\n" {
					prefix = ""
				}
				list.WriteString(prefix + line)
			}
			list.WriteString("\n")
			var units []*decodeUnit
			if err := splitYAMLStream("l.yaml", bufio.NewReader(strings.NewReader(list.String())), func(u *decodeUnit) { units = append(units, u) }); err != nil {
				t.Fatal(err)
			}
			if len(units) != 1 {
				t.Fatalf("split %d units, want 1", len(units))
			}
			got, err := yaml.YAMLToJSON(units[0].raw)
			if err != nil {
				t.Fatalf("%v\n%s", err, units[0].raw)
			}
			var whole map[string]any
			if err := yaml.Unmarshal([]byte(tc.item), &whole); err != nil {
				t.Fatal(err)
			}
			if meta, ok := whole["metadata"].(map[string]any); ok && tc.dropped {
				delete(meta, "managedFields")
			}
			want, err := json.Marshal(whole)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("\nsplit: %s\nwant:  %s\nitem text:\n%s", got, want, units[0].raw)
			}
		})
	}
}
