package plan

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

// separatePasses is what readPruned fuses: compact, then prune.
func separatePasses(js []byte, rule *pruneRule) string {
	return string(prune(nil, appendCompact(nil, js), rule))
}

// TestReadPrunedMatches: the fixture's API-server-shaped objects, indented
// as kubectl prints them and compact, are pruned in one pass to the bytes
// the separate passes make.
func TestReadPrunedMatches(t *testing.T) {
	for _, obj := range pruneFixture() {
		compact, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		indented, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			t.Fatal(err)
		}
		for name, js := range map[string][]byte{"compact": compact, "indented": indented} {
			got, rule, ok := readPruned(nil, js)
			if !ok {
				t.Fatalf("%s %s: readPruned refused it", name, obj.GetName())
			}
			if want := separatePasses(js, rule); string(got) != want {
				t.Errorf("%s %s:\nfused:    %s\nseparate: %s", name, obj.GetName(), got, want)
			}
		}
	}
}

// TestReadPrunedCases: what readPruned must refuse, and what it must take
// as the separate passes do.
func TestReadPrunedCases(t *testing.T) {
	for _, tc := range []struct {
		name, js string
		ok       bool
	}{
		{"pod", "{\n  \"kind\": \"Pod\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {\"managedFields\": [{\"a\": \"}\"}], \"name\": \"p\"},\n  \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"x\"}]}\n}\n", true},
		{"node images", `{"apiVersion":"v1","kind":"Node","status":{"images":[{"names":["a"]}],"capacity":{"cpu":"2"}}}`, true},
		{"emptied annotations", `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"` + lastAppliedKey + `":"{}"}}}`, true},
		{"filtered conditions", `{"apiVersion":"v1","kind":"Pod","status":{"conditions":[ {"type": "Ready"} , {"type": "PodScheduled"} ]}}`, true},
		{"escaped string", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a\"b\\"}}`, true},
		{"kind not leading", `{"metadata":{},"apiVersion":"v1","kind":"Pod"}`, false},
		{"kind escaped", `{"apiVersion":"v1","kind":"P\u006fd"}`, false},
		{"scalars split by space", `{"apiVersion":"v1","kind":"Pod","spec":{"priority":1 2}}`, false},
		{"trailing comma", `{"apiVersion":"v1","kind":"Pod","spec":{},}`, false},
		{"trailing bytes", `{"apiVersion":"v1","kind":"Pod"} x`, false},
		{"unterminated", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a}`, false},
		{"empty element", `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[,]}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rule, ok := readPruned(nil, []byte(tc.js))
			if ok != tc.ok {
				t.Fatalf("readPruned answered %v, want %v", ok, tc.ok)
			}
			if ok && string(got) != separatePasses([]byte(tc.js), rule) {
				t.Errorf("fused:    %s\nseparate: %s", got, separatePasses([]byte(tc.js), rule))
			}
		})
	}
}

// FuzzReadPruned: whenever readPruned answers, it answers what the
// separate passes would.
func FuzzReadPruned(f *testing.F) {
	// Small seeds: the fuzzer stalls on whole API-server pods (10 kB);
	// TestReadPrunedMutations mutates those.
	f.Add([]byte("{\n  \"kind\": \"Pod\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {\"managedFields\": [{\"a\": \"}\"}], \"name\": \"p\"},\n  \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"x\"}]}\n}\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Node","status":{"images":[{"names":["a"]}],"capacity":{"cpu":"2"}}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","status":{"conditions":[{"type":"Ready"},{"type":"PodScheduled"}]}}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		got, rule, ok := readPruned(nil, js)
		if ok && string(got) != separatePasses(js, rule) {
			t.Errorf("%q\nfused:    %s\nseparate: %s", js, got, separatePasses(js, rule))
		}
	})
}

// TestReadPrunedMutations: fixture objects with bytes changed, dropped or
// added at random (a fixed seed) are refused, or pruned as the separate
// passes prune them.
func TestReadPrunedMutations(t *testing.T) {
	random := rand.New(rand.NewPCG(20, 26))
	var sources [][]byte
	for _, obj := range pruneFixture()[:12] {
		indented, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, indented)
	}
	alphabet := []byte("{}[]\",: \n\\aT0-")
	answered := 0
	for range 20000 {
		js := bytes.Clone(sources[random.IntN(len(sources))])
		for range 1 + random.IntN(3) {
			at := random.IntN(len(js))
			switch random.IntN(3) {
			case 0:
				js[at] = alphabet[random.IntN(len(alphabet))]
			case 1:
				js = append(js[:at], js[at+1:]...)
			default:
				js = slices.Insert(js, at, alphabet[random.IntN(len(alphabet))])
			}
		}
		got, rule, ok := readPruned(nil, js)
		if !ok {
			continue
		}
		answered++
		if want := separatePasses(js, rule); string(got) != want {
			t.Fatalf("%s\nfused:    %s\nseparate: %s", js, got, want)
		}
	}
	if answered < 1000 {
		t.Errorf("readPruned answered %d of 20000 mutated objects; the test proves little", answered)
	}
}
