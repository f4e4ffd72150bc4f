package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// slowRead is the obviously correct reading of a dump: apimachinery's
// YAML-or-JSON decoder (sigs.k8s.io/yaml for YAML) splits it into
// documents, a List into its items, and each object is decoded whole by
// encoding/json and compacted.
func slowRead(t *testing.T, dump []byte) *Objects {
	t.Helper()
	read := &Objects{}
	var compactor snapshot.Compactor
	docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(dump), 4096)
	for {
		var raw json.RawMessage
		err := docs.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return read
		}
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		items := []json.RawMessage{raw}
		if isList(list.Kind) {
			items = list.Items
		}
		for _, item := range items {
			read.addDecoded(decoded{obj: slowObject(t, &compactor, item)})
		}
	}
}

// slowObject decodes one object whole and compacts it.
func slowObject(t *testing.T, compactor *snapshot.Compactor, item []byte) any {
	t.Helper()
	var meta typeMeta
	if err := json.Unmarshal(item, &meta); err != nil {
		t.Fatal(err)
	}
	newObject, ok := kinds[apiGroup(meta.APIVersion)+"/"+meta.Kind]
	if !ok {
		t.Fatalf("unknown kind %s", meta.Kind)
	}
	obj := newObject()
	if err := json.Unmarshal(item, obj); err != nil {
		t.Fatal(err)
	}
	compactor.Compact(obj.(client.Object))
	return obj
}

// slowPathDump is an API-server-shaped cluster (managedFields, container
// statuses, probes, env, projected volumes) with the pods pruning must
// keep whole (pruneFixture's: host port, claim volume, resize, sidecar...).
func slowPathDump() []any {
	objects := scaletest.Generate(scaletest.Size{Nodes: 30, BoundPods: 900, PendingPods: 120, Seed: 7}).Objects()
	fixture := pruneFixture()
	for _, special := range fixture[len(fixture)-9:] {
		objects = append(objects, special)
	}
	return objects
}

// writeDocuments writes objects as JSON documents one after another,
// indented, as `kubectl get pod a -o json; kubectl get pod b -o json` do.
func writeDocuments(w io.Writer, objects []any) error {
	for _, obj := range objects {
		js, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return err
		}
		if _, err := w.Write(append(js, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// writeList writes objects through a scaletest ListWriter.
func writeList(lw *scaletest.ListWriter, objects []any) error {
	for _, obj := range objects {
		if err := lw.Add(obj); err != nil {
			return err
		}
	}
	return lw.Close()
}

// TestReadMatchesSlowPath: each way a dump is written (kubectl's indented
// JSON List, its YAML List, JSON documents one after another) reads into
// the same objects, and so the same plan and disruption moves, as the
// slow path reads; every pod and node is read.
func TestReadMatchesSlowPath(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	objects := slowPathDump()
	for _, tc := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"cluster.json", func(w io.Writer) error { return writeList(scaletest.NewJSONListWriter(w), objects) }},
		{"cluster.yaml", func(w io.Writer) error { return writeList(scaletest.NewYAMLListWriter(w), objects) }},
		{"documents.json", func(w io.Writer) error { return writeDocuments(w, objects) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dump bytes.Buffer
			if err := tc.write(&dump); err != nil {
				t.Fatal(err)
			}
			want := slowRead(t, dump.Bytes())
			got := &Objects{}
			if err := got.Read(tc.name, bytes.NewReader(dump.Bytes())); err != nil {
				t.Fatal(err)
			}
			if len(got.Pods) != 1029 || len(got.Nodes) != 30 || len(got.NodeClaims) != 30 {
				t.Fatalf("read %d pods, %d nodes, %d NodeClaims; want 1029, 30, 30", len(got.Pods), len(got.Nodes), len(got.NodeClaims))
			}
			for i := range want.Pods {
				if !reflect.DeepEqual(got.Pods[i], want.Pods[i]) {
					t.Fatalf("pod %d (%s) differs from the slow path's\ngot:  %+v\nwant: %+v", i, want.Pods[i].Name, got.Pods[i], want.Pods[i])
				}
			}
			if !reflect.DeepEqual(got.Cluster, want.Cluster) {
				t.Fatalf("the objects read differ from the slow path's")
			}
			plan := solveJSON(t, want.Cluster, cat)
			if len(plan) < 100 || !strings.Contains(plan, "Standard_") {
				t.Fatalf("the slow path's plan is empty (%q), so the comparison proves nothing", plan)
			}
			if solveJSON(t, got.Cluster, cat) != plan {
				t.Errorf("the plan differs from the slow path's")
			}
			if disruptionJSON(t, got.Cluster, cat) != disruptionJSON(t, want.Cluster, cat) {
				t.Errorf("the disruption moves differ from the slow path's")
			}
		})
	}
}
