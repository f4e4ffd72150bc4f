package customhandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

// Response is the body the host expects back. The host reads it only from a
// 2xx answer: it checks the status first (Azure/azure-functions-host
// src/WebJobs.Script/Workers/Http/DefaultHttpWorkerService.cs,
// EnsureSuccessStatusCode), so a failure's Outputs and Logs are dropped and
// Service Bus dead-letters with its own reason (MaxDeliveryCountExceeded).
// A failure's reason reaches Application Insights through the process's
// stderr, which the host forwards as traces (Host.Function.Console): every
// Logger line is written there as well.
type Response struct {
	Outputs     map[string]any `json:"Outputs"`
	Logs        []string       `json:"Logs"`
	ReturnValue any            `json:"ReturnValue"`
}

// PermanentError marks a failure that retrying cannot fix. The handler answers
// it with 400; the host still retries (it cannot tell) and finally
// dead-letters the message; the reason is in the handler's stderr (traces)
// and in the karpfunc_messages_total outcome "permanent".
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// NewPermanentError formats a PermanentError.
func NewPermanentError(format string, args ...any) error {
	return &PermanentError{Err: fmt.Errorf(format, args...)}
}

// IsPermanent reports whether err is, or wraps, a PermanentError or a
// messages.InvalidError.
func IsPermanent(err error) bool {
	var permanent *PermanentError
	return errors.As(err, &permanent) || messages.IsInvalid(err)
}

// Logger collects an invocation's log lines for the response's Logs and
// mirrors them to the process's stderr, which the host also captures.
type Logger struct {
	mu     sync.Mutex
	lines  []string
	mirror io.Writer
	prefix string
}

// NewLogger returns a Logger that mirrors each line to w (nil: no mirror),
// prefixed with prefix.
func NewLogger(w io.Writer, prefix string) *Logger { return &Logger{mirror: w, prefix: prefix} }

// Printf records one log line.
func (l *Logger) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if l.mirror != nil {
		fmt.Fprintf(l.mirror, "%s%s\n", l.prefix, line)
	}
}

// Lines returns a copy of the recorded lines.
func (l *Logger) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// Func is one function's body.
type Func func(ctx context.Context, inv *Invocation, log *Logger) error

// MaxRequestBytes bounds a request body: a Premium Service Bus message is at
// most 100 MB, and the envelope adds quoting.
const MaxRequestBytes = 256 << 20

// HandlerOptions tunes Handle.
type HandlerOptions struct {
	// LogMirror receives every log line as it is written (default os.Stderr).
	LogMirror io.Writer
}

// Handle adapts fn to the custom handler protocol with default options.
func Handle(fn Func) http.Handler { return HandleWithOptions(fn, HandlerOptions{}) }

// HandleWithOptions adapts fn to the custom handler protocol: it decodes the
// envelope, runs fn, and answers 200 with a Response on success; on error
// 400 (IsPermanent) or 500, so the host fails the invocation and the
// message is retried and finally dead-lettered. The reason is the last log
// line, written to the mirror (stderr) whatever the answer, since the host
// drops a failure's Logs. A panic becomes a 500 with its stack: one bad message
// must never take the process, and every other in-flight invocation, down.
func HandleWithOptions(fn Func, opts HandlerOptions) http.Handler {
	mirror := opts.LogMirror
	if mirror == nil {
		mirror = os.Stderr
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Azure-Functions-InvocationId")
		log := NewLogger(mirror, fmt.Sprintf("[%s %s] ", strings.TrimPrefix(r.URL.Path, "/"), id))
		if r.Method != http.MethodPost {
			log.Printf("error: method %s not allowed; the host invokes functions with POST", r.Method)
			writeResponse(w, http.StatusMethodNotAllowed, Response{Logs: log.Lines()})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		if err != nil {
			log.Printf("error: reading request body: %v", err)
			writeResponse(w, http.StatusBadRequest, Response{Logs: log.Lines()})
			return
		}
		inv, err := DecodeInvocation(body, id)
		if err != nil {
			log.Printf("error: %v", err)
			writeResponse(w, http.StatusBadRequest, Response{Logs: log.Lines()})
			return
		}
		if err := run(r.Context(), fn, inv, log); err != nil {
			status := http.StatusInternalServerError
			if IsPermanent(err) {
				status = http.StatusBadRequest
			}
			log.Printf("error: %v", err)
			writeResponse(w, status, Response{Logs: log.Lines()})
			return
		}
		respond(w, Response{Outputs: inv.outputs, ReturnValue: inv.returnValue}, log)
	})
}

// respond answers 200 with resp and log's lines, or, when an output the
// function set cannot be encoded, 500 with the reason logged (and so
// mirrored to stderr).
func respond(w http.ResponseWriter, resp Response, log *Logger) {
	resp.Logs = log.Lines()
	if _, err := json.Marshal(resp); err != nil {
		log.Printf("error: encoding the response: %v", err)
		writeResponse(w, http.StatusInternalServerError, Response{Logs: log.Lines()})
		return
	}
	writeResponse(w, http.StatusOK, resp)
}

// PanicError is a recovered panic.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

func run(ctx context.Context, fn Func, inv *Invocation, log *Logger) (err error) {
	defer func() {
		if recovered := recover(); recovered != nil {
			err = &PanicError{Value: recovered, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, inv, log)
}

func writeResponse(w http.ResponseWriter, status int, resp Response) {
	if resp.Logs == nil {
		resp.Logs = []string{}
	}
	body, err := json.Marshal(resp)
	if err != nil {
		// An output the function set cannot be encoded: that is the
		// function's failure, reported as such rather than as a torn body.
		status = http.StatusInternalServerError
		body, _ = json.Marshal(Response{Logs: append(resp.Logs, fmt.Sprintf("error: encoding the response: %v", err))})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
