package armemulator

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// armError is the ARM error body: {"error":{"code":...,"message":...}}.
type armError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Target  string `json:"target,omitempty"`
}

type errorResponse struct {
	Error armError `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorResponse{Error: armError{Code: code, Message: message}})
}

func writeFault(w http.ResponseWriter, f *Fault) {
	setRetryAfter(w.Header(), f.RetryAfter)
	writeError(w, f.status(), f.Code, f.message())
}

// setRetryAfter sends the standard Retry-After (seconds) and, for sub-second
// precision, Retry-After-Ms, which azcore prefers; this keeps tests with
// millisecond delays fast without lying to clients that only read seconds.
func setRetryAfter(h http.Header, d time.Duration) {
	if d <= 0 {
		return
	}
	secs := (d + time.Second - 1) / time.Second
	h.Set("Retry-After", strconv.FormatInt(int64(secs), 10))
	if d%time.Second != 0 {
		h.Set("Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
