package live

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/disruption"
)

func sampleRecord() Record {
	refs := []CandidateRef{{Name: "default-a", UID: "u-a"}, {Name: "default-b", UID: "u-b"}}
	return Record{ID: CommandID(disruption.MethodMultiNode, []types.UID{"u-a", "u-b"}), Method: disruption.MethodMultiNode,
		Reason: string(disruption.ReasonUnderutilized), Candidates: refs, Replacements: 2}
}

// The record round-trips, and its annotations are the format earlier
// versions wrote, byte for byte: a command in flight across an upgrade is
// still finished.
func TestRecordRoundTrip(t *testing.T) {
	rec := sampleRecord()
	encoded := rec.Encode()
	wire := map[string]string{
		apis.AnnotationDisruptionCommand:      rec.ID,
		apis.AnnotationDisruptionCandidates:   "default-a=u-a,default-b=u-b",
		apis.AnnotationDisruptionReplacements: "2",
		apis.AnnotationDisruptionReason:       "Underutilized",
		apis.AnnotationDisruptionMethod:       "multi-node consolidation",
	}
	if !maps.Equal(encoded, wire) {
		t.Fatalf("Encode = %v, want the on-cluster format %v", encoded, wire)
	}
	// Other annotations on the NodeClaim do not disturb it.
	encoded["karpenter.sh/do-not-disrupt"] = "false"
	got, found, err := Decode(encoded)
	if err != nil || !found || !reflect.DeepEqual(got, rec) {
		t.Fatalf("Decode(Encode(r)) = %+v, %v, %v; want %+v", got, found, err, rec)
	}
	for _, method := range disruption.MethodNames() {
		one := Record{ID: CommandID(method, []types.UID{"u"}), Method: method, Reason: "Drifted", Candidates: []CandidateRef{{Name: "n", UID: "u"}}, Replacements: 1}
		if back, _, err := Decode(one.Encode()); err != nil || !reflect.DeepEqual(back, one) {
			t.Errorf("%s: Decode(Encode(r)) = %+v, %v", method, back, err)
		}
	}
}

// A NodeClaim without a command is not one's replacement; a record that
// cannot be read in full is refused, naming the annotation at fault.
func TestRecordDecodeGarbage(t *testing.T) {
	if rec, found, err := Decode(map[string]string{"other": "x"}); found || err != nil || !reflect.DeepEqual(rec, Record{}) {
		t.Fatalf("no command: Decode = %+v, %v, %v", rec, found, err)
	}
	for _, tc := range []struct {
		name   string
		key    string
		value  string // "" deletes the annotation
		errHas string
	}{
		{"reason missing", apis.AnnotationDisruptionReason, "", apis.AnnotationDisruptionReason + " is missing"},
		{"method missing", apis.AnnotationDisruptionMethod, "", `is "", not a disruption method`},
		{"method unknown", apis.AnnotationDisruptionMethod, "teleportation", `"teleportation", not a disruption method`},
		{"count missing", apis.AnnotationDisruptionReplacements, "", `is "", not a count`},
		{"count not a number", apis.AnnotationDisruptionReplacements, "two", `"two", not a count of at least 1`},
		{"count zero", apis.AnnotationDisruptionReplacements, "0", `"0", not a count of at least 1`},
		{"count negative", apis.AnnotationDisruptionReplacements, "-1", `"-1", not a count`},
		{"candidates missing", apis.AnnotationDisruptionCandidates, "", apis.AnnotationDisruptionCandidates + " is missing"},
		{"candidate without uid", apis.AnnotationDisruptionCandidates, "default-a=u-a,default-b", `"default-b" is not name=uid`},
		{"candidate with empty uid", apis.AnnotationDisruptionCandidates, "default-a=,default-b=u-b", `"default-a=" is not name=uid`},
		{"candidate without name", apis.AnnotationDisruptionCandidates, "=u-a,default-b=u-b", `"=u-a" is not name=uid`},
		{"trailing comma", apis.AnnotationDisruptionCandidates, "default-a=u-a,default-b=u-b,", `"" is not name=uid`},
		{"other candidates than the id's", apis.AnnotationDisruptionCandidates, "default-a=u-a,default-b=u-c", "but its method and candidates make"},
		{"other method than the id's", apis.AnnotationDisruptionMethod, disruption.MethodSingleNode, "but its method and candidates make"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			annotations := sampleRecord().Encode()
			if tc.value == "" {
				delete(annotations, tc.key)
			} else {
				annotations[tc.key] = tc.value
			}
			rec, found, err := Decode(annotations)
			if !found {
				t.Fatal("a NodeClaim with a command id was not taken for a replacement")
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "disruption command "+annotations[apis.AnnotationDisruptionCommand]) {
				t.Fatalf("Decode = %+v, %v; want an error naming the command and containing %q", rec, err, tc.errHas)
			}
		})
	}
}

func TestValidatingMark(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	mark := encodeValidating(at)
	if mark != "2026-05-01T11:00:00Z" {
		t.Fatalf("mark = %q, want RFC 3339 in UTC", mark)
	}
	if got, ok := decodeValidating(map[string]string{apis.AnnotationDisruptionValidating: mark}); !ok || !got.Equal(at) {
		t.Fatalf("decodeValidating = %v, %v", got, ok)
	}
	if encodeValidating(time.Time{}) != "" {
		t.Fatal("the zero time must remove the mark")
	}
	for _, bad := range []string{"", "soon", "2026-05-01"} {
		if _, ok := decodeValidating(map[string]string{apis.AnnotationDisruptionValidating: bad}); ok {
			t.Errorf("mark %q read as a due time", bad)
		}
	}
}

// Every replacement's record must be readable: one bad copy refuses the
// command, naming the NodeClaim.
func TestReadRecord(t *testing.T) {
	claim := func(name string, annotations map[string]string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	}
	good := sampleRecord()
	got, err := readRecord([]*karpv1.NodeClaim{claim("r1", good.Encode()), claim("r2", good.Encode())})
	if err != nil || !reflect.DeepEqual(got, good) {
		t.Fatalf("readRecord = %+v, %v; want %+v", got, err, good)
	}
	bad := good.Encode()
	bad[apis.AnnotationDisruptionReplacements] = "many"
	if _, err := readRecord([]*karpv1.NodeClaim{claim("r1", good.Encode()), claim("r2", bad)}); err == nil || !strings.Contains(err.Error(), "NodeClaim r2: disruption command") {
		t.Fatalf("readRecord with a bad copy: %v; want an error naming r2", err)
	}
}
