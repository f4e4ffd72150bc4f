package localbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// MaxPublishRequestBytes bounds a POST /queues/{queue}/messages body.
const MaxPublishRequestBytes = 64 << 20

// Handler is the bus's HTTP API, for publishers in other processes (the
// relay, the Functions handler) and for looking at a running bus:
//
//	POST /queues/{queue}/messages   JSON array of bus.Message → 202
//	GET  /queues/{queue}/deadletter JSON array of DeadLetter
//	GET  /queues                    JSON object: queue name → QueueStats
//
// A publish presents the sending identity's credential (Credential) as
// "Authorization: Bearer <credential>" and is authorized as that identity
// (Client.Publish); the GET routes are the owner's view and need none.
//
// Errors are JSON {"error": "...", "code": "..."} with 400 (bad request),
// 401 (unauthorized access, code "unauthorized" as azservicebus reports
// it), 404 (unknown queue or route, code MessagingEntityNotFound) or 503
// (closed).
func (b *Bus) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /queues/{queue}/messages", b.servePublish)
	mux.HandleFunc("GET /queues/{queue}/deadletter", func(w http.ResponseWriter, r *http.Request) {
		dl, err := b.DeadLetters(r.PathValue("queue"))
		if err != nil {
			writeError(w, err)
			return
		}
		if dl == nil {
			dl = []DeadLetter{}
		}
		writeJSON(w, http.StatusOK, dl)
	})
	mux.HandleFunc("GET /queues", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Stats())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf(
			"no route %s %s; the bus serves POST /queues/{queue}/messages, GET /queues/{queue}/deadletter, GET /queues",
			r.Method, r.URL.Path)})
	})
	return mux
}

func (b *Bus) servePublish(w http.ResponseWriter, r *http.Request) {
	queue := r.PathValue("queue")
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxPublishRequestBytes))
	// Strict: a field this bus does not know means the publisher and the bus
	// disagree about bus.Message, which should fail at the first message.
	dec.DisallowUnknownFields()
	var msgs []bus.Message
	if err := dec.Decode(&msgs); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf(
			"queue %q: the body must be a JSON array of messages: %v", queue, err)})
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf(
			"queue %q: the body must hold exactly one JSON array", queue)})
		return
	}
	identity, err := b.identityOf(r.Header.Get("Authorization"))
	if err != nil {
		writeError(w, err)
		return
	}
	if err := b.As(identity).Publish(r.Context(), queue, msgs...); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]int{"accepted": len(msgs)})
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	code := ""
	var nf *QueueNotFoundError
	var unauthorized *bus.UnauthorizedError
	switch {
	case errors.As(err, &unauthorized):
		// The description alone: the client wraps it in its own
		// *bus.UnauthorizedError again.
		status = http.StatusUnauthorized
		code = CodeUnauthorizedAccess
		err = errors.New(unauthorized.Description)
	case errors.As(err, &nf):
		status = http.StatusNotFound
		code = CodeMessagingEntityNotFound
	case errors.Is(err, ErrClosed):
		status = http.StatusServiceUnavailable
	}
	body := map[string]string{"error": err.Error()}
	if code != "" {
		body["code"] = code
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
