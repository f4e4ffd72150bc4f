package plan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/plan"
)

// indentedJSON is each YAML document of objects as `kubectl get -o json`
// prints it: indented, one after another.
func indentedJSON(t *testing.T, yamlDocs string) string {
	t.Helper()
	var out bytes.Buffer
	for _, doc := range strings.Split(yamlDocs, "\n---\n") {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if string(js) == "null" {
			continue // a comment-only YAML document
		}
		if err := json.Indent(&out, js, "", "    "); err != nil {
			t.Fatal(err)
		}
		out.WriteString("\n")
	}
	return out.String()
}

func TestReadJSONStreamMatchesYAML(t *testing.T) {
	fromYAML := &plan.Objects{}
	if err := fromYAML.Read("objects.yaml", strings.NewReader(objects)); err != nil {
		t.Fatal(err)
	}
	fromJSON := &plan.Objects{}
	if err := fromJSON.Read("objects.json", strings.NewReader(indentedJSON(t, objects))); err != nil {
		t.Fatal(err)
	}
	if len(fromJSON.NodePools) != 1 || len(fromJSON.NodeClasses) != 1 || len(fromJSON.Pods) != 4 || len(fromJSON.Nodes) != 1 || len(fromJSON.StorageClasses) != 1 {
		t.Fatalf("read %d nodepools, %d classes, %d pods, %d nodes, %d storageclasses from the JSON stream; want 1,1,4,1,1 (every document, not only the first)",
			len(fromJSON.NodePools), len(fromJSON.NodeClasses), len(fromJSON.Pods), len(fromJSON.Nodes), len(fromJSON.StorageClasses))
	}
	for i := range fromYAML.Pods {
		if fromYAML.Pods[i].Name != fromJSON.Pods[i].Name {
			t.Errorf("pod %d: %s from JSON, %s from YAML; want file order", i, fromJSON.Pods[i].Name, fromYAML.Pods[i].Name)
		}
	}
	want := strings.Replace(fromYAML.Warnings[0], "objects.yaml", "objects.json", 1)
	if len(fromJSON.Warnings) != 1 || fromJSON.Warnings[0] != want {
		t.Errorf("warnings = %q, want %q", fromJSON.Warnings, want)
	}
}

func TestReadJSONErrors(t *testing.T) {
	node := `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}`
	for _, tc := range []struct {
		name, input, want string
	}{
		{"trailing garbage", node + "\n" + node + "\nnot json", "f.json: document 3: not valid JSON (at byte"},
		{"a scalar after the objects", node + "\n42\n", "f.json: document 2: found 42 at byte"},
		{"truncated", node + "\n{\"apiVersion\": \"v1\", \"kind\": \"No", "f.json: document 2: not valid JSON"},
		{"bad item", `{"apiVersion": "v1", "kind": "List", "items": [` + node + `, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": 7}}]}`, "f.json: document 1, item 2:"},
		{"broken item", `{"apiVersion": "v1", "kind": "List", "items": [` + node + `, {"apiVersion": }]}`, "f.json: document 1, item 2: not valid JSON"},
		{"list without kind", `{"apiVersion": "v1", "items": [` + node + `]}`, "f.json: document 1: has no kind"},
		{"list in a list", `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": []}]}`, "document 1, item 1: a List inside a List"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &plan.Objects{}
			err := o.Read("f.json", strings.NewReader(tc.input))
			var de *plan.DocumentError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want a DocumentError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestReadJSONListItemsInOrder(t *testing.T) {
	var items []string
	for _, name := range []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"} {
		items = append(items, `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "`+name+`"}}`)
	}
	list := "{\n \"apiVersion\": \"v1\",\n \"items\": [\n" + strings.Join(items, ",\n") + "\n ],\n \"kind\": \"List\",\n \"metadata\": {\"resourceVersion\": \"\"}\n}\n"
	o := &plan.Objects{}
	if err := o.Read("dump.json", strings.NewReader(list+list)); err != nil {
		t.Fatal(err)
	}
	if len(o.Nodes) != 18 {
		t.Fatalf("read %d nodes from two Lists of 9 (items before kind, as kubectl prints them), want 18", len(o.Nodes))
	}
	for i, n := range o.Nodes {
		if want := items[i%9][strings.Index(items[i%9], `"name": "`)+9 : len(items[i%9])-3]; n.Name != want {
			t.Errorf("node %d is %s, want %s", i, n.Name, want)
		}
	}
}

// TestReadJSONScannerEdges: the scanner that splits a List into items
// tracks strings, escapes and nesting itself, and reads in chunks; items
// whose strings hold brackets, quotes and backslashes, read one byte at a
// time (every chunk boundary), come out whole, and managedFields wherever
// it stands in metadata is dropped without touching its neighbours.
func TestReadJSONScannerEdges(t *testing.T) {
	managed := `"managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]`
	pods := []string{
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {` + managed + `, "name": "first", "namespace": "a", "annotations": {"note": "}]\"\\{["}}, "spec": {"containers": [{"name": "c"}]}}`,
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "middle", ` + managed + `, "namespace": "b", "labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}]}}`,
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "last", "namespace": "c", ` + managed + `}, "spec": {"containers": [{"name": "c"}]}}`,
	}
	list := "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n" + strings.Join(pods, ",\n") + "\n]}\n"
	for _, tc := range []struct {
		name   string
		reader func(string) io.Reader
	}{
		{"whole", func(s string) io.Reader { return strings.NewReader(s) }},
		{"one byte at a time", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := &plan.Objects{}
			if err := objs.Read("dump.json", tc.reader(list+list)); err != nil {
				t.Fatal(err)
			}
			if len(objs.Pods) != 6 {
				t.Fatalf("read %d pods from two Lists of 3, want 6", len(objs.Pods))
			}
			want := []string{"a/first", "b/middle", "c/last"}
			for i, pod := range objs.Pods {
				if got := pod.Namespace + "/" + pod.Name; got != want[i%3] || pod.ManagedFields != nil {
					t.Errorf("pod %d is %s with %d managedFields, want %s with none", i, got, len(pod.ManagedFields), want[i%3])
				}
			}
			if note := objs.Pods[0].Annotations["note"]; note != `}]"\{[` {
				t.Errorf("annotation = %q, want the brackets, quote and backslash as written", note)
			}
			if objs.Pods[1].Labels["app"] != "x" {
				t.Errorf("labels after managedFields = %v, want app=x", objs.Pods[1].Labels)
			}
		})
	}
}
