package live

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/disruption"
)

// Record is a command in flight as its replacement NodeClaims carry it: the
// state of the command lives in the cluster, so any pass can finish it.
//
// On the cluster (the format every version so far writes and reads), one
// annotation per field, each a plain string:
//
//	karpfunc.azure.com/disruption-command       ID, 16 hex (CommandID)
//	karpfunc.azure.com/disruption-candidates    "name=uid,name=uid"
//	karpfunc.azure.com/disruption-replacements  decimal, at least 1
//	karpfunc.azure.com/disruption-reason        Karpenter's reason (Underutilized, Drifted)
//	karpfunc.azure.com/disruption-method        a disruption.Method* name
//
// Decode refuses a record it cannot read in full (a field missing or
// malformed, an unknown method, an ID that is not its method's and
// candidates'), saying which annotation and why: the command is then
// abandoned as one whose replacement failed (its candidates stay).
type Record struct {
	ID           string
	Method       string
	Reason       string
	Candidates   []CandidateRef
	Replacements int
}

// CandidateRef names a candidate NodeClaim at its UID.
type CandidateRef struct {
	Name string
	UID  types.UID
}

// recordKeys are the annotations a Record is kept in.
var recordKeys = []string{
	apis.AnnotationDisruptionCommand, apis.AnnotationDisruptionCandidates, apis.AnnotationDisruptionReplacements,
	apis.AnnotationDisruptionReason, apis.AnnotationDisruptionMethod,
}

// Encode is the record as annotations.
func (r Record) Encode() map[string]string {
	refs := make([]string, len(r.Candidates))
	for i, ref := range r.Candidates {
		refs[i] = ref.Name + "=" + string(ref.UID)
	}
	return map[string]string{
		apis.AnnotationDisruptionCommand:      r.ID,
		apis.AnnotationDisruptionCandidates:   strings.Join(refs, ","),
		apis.AnnotationDisruptionReplacements: strconv.Itoa(r.Replacements),
		apis.AnnotationDisruptionReason:       r.Reason,
		apis.AnnotationDisruptionMethod:       r.Method,
	}
}

// commandOf is the ID of the command whose replacement nc is ("" none).
func commandOf(annotations map[string]string) string {
	return annotations[apis.AnnotationDisruptionCommand]
}

// Decode reads a record from a NodeClaim's annotations. found is false when
// they carry no command; err says why a command's record cannot be read.
func Decode(annotations map[string]string) (rec Record, found bool, err error) {
	rec.ID = commandOf(annotations)
	if rec.ID == "" {
		return Record{}, false, nil
	}
	if err := rec.decodeFields(annotations); err != nil {
		return Record{}, true, fmt.Errorf("disruption command %s: %w", rec.ID, err)
	}
	return rec, true, nil
}

func (r *Record) decodeFields(annotations map[string]string) error {
	r.Reason = annotations[apis.AnnotationDisruptionReason]
	if r.Reason == "" {
		return fmt.Errorf("annotation %s is missing", apis.AnnotationDisruptionReason)
	}
	r.Method = annotations[apis.AnnotationDisruptionMethod]
	if !disruption.IsMethod(r.Method) {
		return fmt.Errorf("annotation %s is %q, not a disruption method (one of %s)", apis.AnnotationDisruptionMethod, r.Method, strings.Join(disruption.MethodNames(), ", "))
	}
	raw := annotations[apis.AnnotationDisruptionReplacements]
	count, err := strconv.Atoi(raw)
	if err != nil || count < 1 {
		return fmt.Errorf("annotation %s is %q, not a count of at least 1", apis.AnnotationDisruptionReplacements, raw)
	}
	r.Replacements = count
	if r.Candidates, err = decodeCandidates(annotations[apis.AnnotationDisruptionCandidates]); err != nil {
		return err
	}
	if want := CommandID(r.Method, r.candidateUIDs()); r.ID != want {
		return fmt.Errorf("annotation %s is %q, but its method and candidates make %q", apis.AnnotationDisruptionCommand, r.ID, want)
	}
	return nil
}

func decodeCandidates(raw string) ([]CandidateRef, error) {
	if raw == "" {
		return nil, fmt.Errorf("annotation %s is missing", apis.AnnotationDisruptionCandidates)
	}
	var refs []CandidateRef
	for _, entry := range strings.Split(raw, ",") {
		name, uid, ok := strings.Cut(entry, "=")
		if !ok || name == "" || uid == "" {
			return nil, fmt.Errorf("annotation %s: %q is not name=uid", apis.AnnotationDisruptionCandidates, entry)
		}
		refs = append(refs, CandidateRef{Name: name, UID: types.UID(uid)})
	}
	return refs, nil
}

func (r Record) candidateUIDs() []types.UID {
	uids := make([]types.UID, len(r.Candidates))
	for i, ref := range r.Candidates {
		uids[i] = ref.UID
	}
	return uids
}

// The validation mark on a command's candidates
// (apis.AnnotationDisruptionValidating) is the validation's due time, RFC
// 3339, in UTC.

// encodeValidating is the mark for a validation due at; "" (no mark) for
// the zero time.
func encodeValidating(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return at.UTC().Format(time.RFC3339)
}

// decodeValidating is the due time a mark holds; false when there is no
// readable mark.
func decodeValidating(annotations map[string]string) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339, annotations[apis.AnnotationDisruptionValidating])
	return at, err == nil
}
