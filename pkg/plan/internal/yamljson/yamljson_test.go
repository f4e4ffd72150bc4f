package yamljson_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/plan/internal/yamljson"
)

// check converts in both ways: when the fast path answers, the slow path
// must succeed with the same bytes and the same decoded value.
func check(t *testing.T, c *yamljson.Converter, in []byte) (handled bool) {
	t.Helper()
	fast, ok := c.Convert(in)
	slow, err := yaml.YAMLToJSON(in)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("fast path answered %s where sigs.k8s.io/yaml fails: %v\ninput:\n%s", fast, err, in)
	}
	if !reflect.DeepEqual(decode(t, fast), decode(t, slow)) {
		t.Fatalf("values differ\ninput:\n%s\nfast: %s\nslow: %s", in, fast, slow)
	}
	if !bytes.Equal(fast, slow) {
		t.Fatalf("bytes differ\ninput:\n%s\nfast: %s\nslow: %s", in, fast, slow)
	}
	return true
}

func decode(t *testing.T, js []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, js)
	}
	return v
}

const kubectlPod = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Pod"}
  creationTimestamp: "2024-05-01T10:00:00Z"
  labels:
    app: web
    pod-template-hash: 5d4f8c9b7
  name: web-5d4f8c9b7-abcde
  namespace: default
  ownerReferences:
  - apiVersion: apps/v1
    blockOwnerDeletion: true
    controller: true
    kind: ReplicaSet
    name: web-5d4f8c9b7
    uid: 0b5e5f3e-1c2d-4e5f-8a9b-0c1d2e3f4a5b
  resourceVersion: "12345"
spec:
  containers:
  - args:
    - --port=8080
    - -v
    command: ["/bin/sh", "-c"]
    env:
    - name: A
      value: "1"
    - name: B
      value: 'it''s <ok> & "fine"'
    image: registry.k8s.io/pause:3.10
    name: c
    ports:
    - containerPort: 8080
      protocol: TCP
    resources:
      limits:
        memory: 1Gi
      requests:
        cpu: 500m
        memory: 512Mi
  nodeSelector: {}
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  priority: 0
  terminationGracePeriodSeconds: 30
status:
  phase: Pending
  podIPs: []
`

// TestHandled: the shapes kubectl and people write are converted by the
// fast path, and exactly as sigs.k8s.io/yaml converts them.
func TestHandled(t *testing.T) {
	var c yamljson.Converter
	for name, in := range map[string]string{
		"kubectl pod":          kubectlPod,
		"compact sequences":    "a:\n- x\n- z\nb: 1\n",
		"nested sequence item": "a:\n  - b: 1\n    c:\n    - d\n    e: f\n  - g\n",
		"empty values":         "a:\nb: # c\nc: ~\nd: null\n",
		"comments":             "# top\na: 1 # one\n  # indented\nb: 'x' # two\n",
		"flow":                 `r: [{key: a, values: ["x", 'y', 3]}, {}]` + "\n",
		"literal":              "s: |\n  line 1\n    more\n\n  line 3\n\nt: |-\n  x\n",
		"folded":               "s: >\n  a\n  b\n\n  c\nt: x\n",
		"quoted keys":          "\"a b\": 1\n'c': \"\\u00e9\\n\\t\"\n",
		"json":                 "{\n  \"kind\": \"Pod\",\n  \"spec\": {\"containers\": [{\"name\": \"c\"}]},\n  \"n\": [1, -2, true, false, null]\n}\n",
		"indented document":    "  a: 1\n  b: 2\n",
		"seq of maps":          "- a: 1\n  b: 2\n-\n- c\n",
		"versions and ips":     "v: 1.29.3\nip: 10.0.0.1\nq: 1.5Gi\nd: 720h\n",
		"unsorted keys":        "z: 1\na: 2\nm: {x: 1, b: 2}\n",
		"html":                 "a: \"<b>&</b>\"\n",
		// Shapes the API server returns that used to go the slow way.
		"managedFields keys":    "f:metadata:\n  f:labels:\n    .: {}\n    f:app: {}\n  f:ownerReferences:\n    k:{\"uid\":\"rs\"}: {}\nf:spec:\n  f:containers:\n    k:{\"name\":\"main\"}:\n      f:ports:\n        k:{\"containerPort\":8080,\"protocol\":\"TCP\"}: {}\n",
		"hash labels":           "a: 5e57657452\nb: 006e95565e\nc: 775378323e\nd: 2e9425e0e0\n",
		"folded quoted message": "message: '0/5000 nodes are available: 5000 Insufficient cpu. preemption: not eligible due\n  to preemptionPolicy=Never.'\nreason: Unschedulable\n",
		"quoted message blanks": "- m: 'a: b  \n\n    c''d\n\n\n    # e  '\n  k: 1\n",
		"url key in sequence":   "- http://x: z\n- a:b: c\n",
	} {
		if !check(t, &c, []byte(in)) {
			t.Errorf("%s: not handled by the fast path", name)
		}
	}
}

// tricky are documents the fast path must either convert exactly or leave
// to sigs.k8s.io/yaml.
var tricky = []string{
	"a: yes\n", "a: on\n", "a: y\n", "a: No\n", "a: TRUE\n", "a: Null\n", "a: ~x\n",
	"a: 1.5\n", "a: 1e3\n", "a: 1E3\n", "a: 0x1f\n", "a: 0o17\n", "a: 017\n", "a: 0b101\n",
	"a: 1_000\n", "a: 12345678901234567890\n", "a: -0\n", "a: +1\n", "a: .5\n", "a: .inf\n",
	"a: 2024-01-01\n", "a: 2024-01-01T10:00:00Z\n", "a: 1h30m\n", "a: 1e\n", "a: 1.\n",
	"yes: 1\n", "1: a\n", "1.5: a\n", "null: a\n", "~: a\n", "<<: {a: 1}\n",
	"a: &x 1\nb: *x\n", "a: !!str 1\n", "? a\n: b\n", "%YAML 1.1\n---\na: 1\n",
	"a: 1\na: 2\n", "a: 1\nA: 2\n", "a: b\n  c\n", "a:\n  b\nc: 1\n", "a: 'x\n  y'\n",
	"a: \"x\n  y\"\n", "a: |+\n  x\n\n", "a: |2\n   x\n", "a: >\n  x\n   y\n  z\n",
	"a: |\n\n  x\n", "a: |\n  x", "a: |-\n  x", "a: >\n  a\n\n\n  b\n", "a: |\n  x\n \n  y\n",
	"a: |\n  x\n     \n  y\n", "a: [a, b,]\n", "a: [a\n, b]\n", "a: {a:1}\n", "a: {\"a\":1}\n",
	"a: [a b]\n", "a: [-1, -a]\n", "{\"a\":\n1}\n", "[1, 2]\n", "a: b: c\n", "a: b:\n",
	"a: x #c\n", "a: x#c\n", "- - a\n", "-a\n", "a:\n- b\n c: 1\n", "a:\n  - b\n - c\n",
	"a: \"\\/\"\n", "a: \"\\ud83d\\ude00\"\n", "a: \"\\u2028\"\n", "a: \"\\x41\"\n", "a: \"\\e\"\n",
	"a: \"<&>\"\n", "\"\\u00e9\": 1\n", "a: 'x' y\n", "a: \"x\"y\n", "a: -\n", "a: - b\n",
	"a:\tb\n", "a: b\r\n", "a: é\n", "a: [1, {b: [2, {c: 3}]}]\n", "a: {b: }\n", "a: {b}\n",
	"a: \"x\" # c\n", "a: 'x'#c\n", "a:  \n  - 1\n", "a: x\n\n\nb: y\n", "a:\n\n  b: 1\n",
	"- a\nb: 1\n", "a: 1\n- b\n", "a\n", "\"a\"\n", "{}\n", "[]\n", "{\"a\": 1} x\n",
	"a: {\"b\": [1, 2], 'c': 'd'}\n", "[\n\"a\",\n\"b\"\n]\n", "{\n\"a\": {\n\"b\": 1\n}\n}\n",
	"a: \"\"\n", "a: ''\n", "'': 1\n", "a: \"\\0\"\n", "a: \"\\b\\f\\r\"\n", "a:\n  -\n  - b\n",
	"a: |\n  # not a comment\n  x\n", "a: |\n  x\n# comment\nb: 1\n", "a: |\n  x\n # c\nb: 1\n",
	"a: >-\n  x\n  y\nb: 1\n", "a: [\"x\", \"y\"] # c\n", "a: []x\n", "a: [] \n", "- |\n  x\n- y\n",
	"f:a:\n  .: {}\n  k:{\"a\": 1}: {}\n", "k:{a}: 1\n", "a:: 1\n", "a:#: 1\n", ".5: a\n", ".: {}\n", "..: a\n",
	"a: +.inf\n", "a: -.Inf\n", "a: +.5\n", "a: -.x\n", "a: 1e400\n", "a: 0.5e400\n", "a: 1_0e5\n", "a: 0e0\n", "a: .e1\n",
	"a: 'x\ny'\n", "a: 'x\n y\n'\n", "a:\n  b: 'x\n  y'\n", "a:\n  b: 'x\n   y'\n", "a: 'x\n\n  y'\n", "a: '\n  y'\n",
	"a: 'x\n  ---\n  y'\n", "a: 'x\n  y' z\n", "a: 'x\n  y'\nb: 1\n", "- 'x\n  y'\n- z\n", "a: 'x''\n  y'''\n",
	"a:\n  b: |\n    x\n  c: 1\n", "x: 9007199254740993\n", "x: 999999999999999999\n", "x: -999999999999999999\n",
}

func TestTricky(t *testing.T) {
	var c yamljson.Converter
	handled := 0
	for _, in := range tricky {
		if check(t, &c, []byte(in)) {
			handled++
		}
	}
	t.Logf("fast path answered %d of %d tricky documents", handled, len(tricky))
}

func FuzzConvert(f *testing.F) {
	f.Add([]byte(kubectlPod))
	for _, in := range tricky {
		f.Add([]byte(in))
	}
	var c yamljson.Converter
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4096 {
			return // go.yaml.in/yaml/v2 is slow on some long inputs; nothing new to learn there
		}
		check(t, &c, in)
	})
}

// withoutManagedFields is sigs.k8s.io/yaml's JSON of in, less the root's
// metadata.managedFields.
func withoutManagedFields(t *testing.T, in string) string {
	t.Helper()
	slow, err := yaml.YAMLToJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(slow, &doc); err != nil {
		t.Fatal(err)
	}
	if meta, ok := doc["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestDropManagedFields: with DropManagedFields, the root metadata's
// block-style managedFields is left out and the rest is what
// sigs.k8s.io/yaml converts; managedFields anywhere else, or written on
// its key's line, is converted as before.
func TestDropManagedFields(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		dropped  bool
	}{
		{"kubectl pod", strings.Replace(kubectlPod, "  name: web", "  managedFields:\n  - apiVersion: v1\n    fieldsType: FieldsV1\n    fieldsV1:\n      f:metadata:\n        f:labels:\n          .: {}\n    manager: kubectl\n    time: \"2024-05-01T10:00:00Z\"\n  name: web", 1), true},
		{"same-indent sequence", "metadata:\n  managedFields:\n  - manager: a\n    fieldsV1:\n      f:x: {}\n\n  # note\n  - manager: b\n  name: p\nspec: {}\n", true},
		{"deeper sequence", "metadata:\n  managedFields:\n    - manager: a\n  name: p\n", true},
		{"last key", "kind: Pod\nmetadata:\n  name: p\n  managedFields:\n  - manager: a\n", true},
		{"inline value", "metadata:\n  managedFields: []\n  name: p\n", false},
		{"not the root's metadata", "spec:\n  metadata:\n    managedFields:\n    - manager: a\n    name: p\n", false},
		{"not under metadata", "status:\n  managedFields:\n  - manager: a\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := yamljson.Converter{DropManagedFields: true}
			fast, ok := c.Convert([]byte(tc.in))
			if !ok {
				t.Fatalf("fast path refused it")
			}
			slow, err := yaml.YAMLToJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			want := string(slow)
			if tc.dropped {
				want = withoutManagedFields(t, tc.in)
			}
			if string(fast) != want {
				t.Errorf("\ngot:  %s\nwant: %s", fast, want)
			}
			if tc.dropped && bytes.Contains(fast, []byte("managedFields")) {
				t.Errorf("managedFields kept: %s", fast)
			}
		})
	}
}

// keyPruner drops the keys in drop and governs the mappings and sequence
// elements under the keys in below.
type keyPruner struct {
	drop  []string
	below map[string]*keyPruner
}

func (p *keyPruner) Drop(key []byte) bool { return slices.Contains(p.drop, string(key)) }

func (p *keyPruner) Mapping(key []byte) yamljson.Pruner { return p.child(key) }

func (p *keyPruner) Elements(key []byte) yamljson.Pruner { return p.child(key) }

func (p *keyPruner) child(key []byte) yamljson.Pruner {
	if sub := p.below[string(key)]; sub != nil {
		return sub
	}
	return nil
}

// TestConvertPruned: entries a Pruner drops are left out, whether their
// value is on the following lines or on the key's line, in mappings and
// in a sequence's mappings; the same keys elsewhere are kept.
func TestConvertPruned(t *testing.T) {
	pruner := &keyPruner{drop: []string{"gone"}, below: map[string]*keyPruner{
		"m": {drop: []string{"lost"}},
		"s": {drop: []string{"lost"}},
	}}
	doc := "a: 1\nm:\n  lost:\n    deep:\n    - 1\n  z: 2\ns:\n- lost: [1, 2]\n  z: 3\n- w: 5\n  lost:\n    v: 4\nt:\n  lost: 6\ngone:\n  - 7\n"
	var c yamljson.Converter
	if _, ok := c.Convert([]byte(doc)); !ok {
		t.Fatal("refused without a Pruner")
	}
	got, ok := c.ConvertPruned([]byte(doc), pruner)
	if !ok {
		t.Fatal("refused")
	}
	want := `{"a":1,"m":{"z":2},"s":[{"z":3},{"w":5}],"t":{"lost":6}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
