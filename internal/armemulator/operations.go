package armemulator

import (
	"fmt"
	"net/http"
	"time"
)

// operation is one long-running operation (a PUT or DELETE), observable at
// the Azure-AsyncOperation URL until its doneAt.
type operation struct {
	id        string
	namespace string
	location  string
	start     time.Time
	doneAt    time.Time
	failure   *Fault
}

func (s *Server) newOperationLocked(namespace, location string, doneAt time.Time, failure *Fault) *operation {
	op := &operation{id: newUUID(), namespace: namespace, location: location, start: s.clock.Now(), doneAt: doneAt, failure: failure}
	s.ops[op.id] = op
	return op
}

func (s *Server) operationURL(sub string, op *operation, results bool) string {
	kind := "operations"
	if results {
		kind = "operationResults"
	}
	return fmt.Sprintf("%s/subscriptions/%s/providers/%s/locations/%s/%s/%s?api-version=%s",
		s.url, sub, op.namespace, op.location, kind, op.id, operationsAPIVersion)
}

// acceptLRO writes the headers of a started long-running operation. PUT
// answers carry Azure-AsyncOperation; DELETE answers carry Location too, as
// ARM does.
func (s *Server) acceptLRO(w http.ResponseWriter, sub string, op *operation, withLocation bool) {
	w.Header().Set("Azure-AsyncOperation", s.operationURL(sub, op, false))
	if withLocation {
		w.Header().Set("Location", s.operationURL(sub, op, true))
	}
	s.setPollHint(w, op)
}

// setPollHint asks the client to come back when the operation should be
// done (at least 10ms, at most 1s later).
func (s *Server) setPollHint(w http.ResponseWriter, op *operation) {
	hint := op.doneAt.Sub(s.clock.Now())
	hint = min(max(hint, 10*time.Millisecond), time.Second)
	setRetryAfter(w.Header(), hint)
}

type operationStatus struct {
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	StartTime time.Time  `json:"startTime"`
	EndTime   *time.Time `json:"endTime,omitempty"`
	Error     *armError  `json:"error,omitempty"`
}

func (s *Server) getOperation(w http.ResponseWriter, r *http.Request, sub, id string, results bool) {
	if _, done := s.inject(w, r, Request{Operation: OpGetOperation, SubscriptionID: sub, Name: id}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	op, ok := s.ops[id]
	now := s.clock.Now()
	var st operationStatus
	if ok {
		st = operationStatus{Name: op.id, StartTime: op.start, Status: "InProgress"}
		if !now.Before(op.doneAt) {
			end := op.doneAt
			st.EndTime = &end
			st.Status = "Succeeded"
			if op.failure != nil {
				st.Status = "Failed"
				st.Error = &armError{Code: op.failure.Code, Message: op.failure.message()}
			}
		} else {
			s.setPollHint(w, op)
		}
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "OperationNotFound", "The operation '"+id+"' was not found.")
		return
	}
	if !results {
		writeJSON(w, http.StatusOK, st)
		return
	}
	switch st.Status {
	case "InProgress":
		w.Header().Set("Location", s.operationURL(sub, op, true))
		w.WriteHeader(http.StatusAccepted)
	case "Failed":
		writeFault(w, op.failure)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) afterReal(d time.Duration) <-chan time.Time { return time.After(d) }
