// Command echohandler is a real custom handler for the local Functions host's
// tests. It records every invocation as a JSON line in $ECHO_RECORD and
// behaves as the message body asks:
//
//	{"action":"ok"}                       succeed
//	{"action":"fail400"|"fail500"}        fail with a permanent / transient error
//	{"action":"panic"}                    panic (recovered into a 500)
//	{"action":"exit","until":N}           exit the process while DeliveryCount <= N, then succeed
//	{"action":"sleep","ms":N}             succeed after N ms
//
// Functions: Echo and Ordered (serviceBusTrigger, binding "msg"), Tick
// (timerTrigger, binding "timer"), Raw (answers 200 with a body that is not
// JSON, whatever it gets).
//
// It lives under functions/ because Go's internal rule lets only code there
// import functions/internal/customhandler.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
)

// Record is one invocation as the handler saw it.
type Record struct {
	Function     string                   `json:"function"`
	InvocationID string                   `json:"invocationId"`
	PID          int                      `json:"pid"`
	Headers      map[string]string        `json:"headers"`
	Metadata     customhandler.Metadata   `json:"metadata"`
	Body         string                   `json:"body,omitempty"`
	Timer        *customhandler.TimerInfo `json:"timer,omitempty"`
	Start        time.Time                `json:"start"`
	End          time.Time                `json:"end"`
	Env          map[string]string        `json:"env"`
}

type command struct {
	Action string `json:"action"`
	Until  int    `json:"until"`
	MS     int    `json:"ms"`
}

var recordMu sync.Mutex

func record(r Record) error {
	path := os.Getenv("ECHO_RECORD")
	if path == "" {
		return nil
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	recordMu.Lock()
	defer recordMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}

type headersKey struct{}

// withHeaders passes the request headers to the function, which the
// envelope does not carry.
func withHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs := map[string]string{
			"User-Agent":                     r.Header.Get("User-Agent"),
			"X-Azure-Functions-HostVersion":  r.Header.Get("X-Azure-Functions-HostVersion"),
			"X-Azure-Functions-InvocationId": r.Header.Get("X-Azure-Functions-InvocationId"),
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), headersKey{}, hs)))
	})
}

func newRecord(ctx context.Context, name string, inv *customhandler.Invocation) Record {
	hs, _ := ctx.Value(headersKey{}).(map[string]string)
	return Record{Function: name, InvocationID: inv.InvocationID, PID: os.Getpid(), Headers: hs,
		Metadata: inv.Metadata, Start: time.Now(),
		Env: map[string]string{"WORKER_ID": os.Getenv("FUNCTIONS_CUSTOMHANDLER_WORKER_ID"),
			"BUS_URL": os.Getenv("KARPFUNC_LOCAL_BUS_URL"), "BUS_CREDENTIAL": os.Getenv("KARPFUNC_LOCAL_BUS_CREDENTIAL"), "APP_SETTING": os.Getenv("ECHO_APP_SETTING")}}
}

func serviceBus(name string) customhandler.Func {
	return func(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
		rec := newRecord(ctx, name, inv)
		body, err := inv.Message("msg")
		if err != nil {
			return err
		}
		rec.Body = string(body)
		var cmd command
		if err := json.Unmarshal(body, &cmd); err != nil {
			return customhandler.NewPermanentError("body is not a command: %v", err)
		}
		if cmd.Action == "sleep" {
			time.Sleep(time.Duration(cmd.MS) * time.Millisecond)
		}
		rec.End = time.Now()
		if err := record(rec); err != nil {
			return fmt.Errorf("recording: %w", err)
		}
		log.Printf("%s: action %q, delivery %d", name, cmd.Action, inv.Metadata.DeliveryCount)
		switch cmd.Action {
		case "ok", "sleep", "":
			return nil
		case "fail400":
			return customhandler.NewPermanentError("told to fail with 400")
		case "fail500":
			return errors.New("told to fail with 500")
		case "panic":
			panic("told to panic")
		case "exit":
			if inv.Metadata.DeliveryCount <= cmd.Until {
				os.Exit(3)
			}
			return nil
		default:
			return customhandler.NewPermanentError("unknown action %q", cmd.Action)
		}
	}
}

func tick(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
	rec := newRecord(ctx, "Tick", inv)
	ti, err := inv.Timer("timer")
	if err != nil {
		return err
	}
	rec.Timer = &ti
	rec.End = time.Now()
	return record(rec)
}

func main() {
	s := customhandler.NewServer(customhandler.ServerOptions{})
	s.Register("Echo", withHeaders(customhandler.Handle(serviceBus("Echo"))))
	s.Register("Ordered", withHeaders(customhandler.Handle(serviceBus("Ordered"))))
	s.Register("Tick", withHeaders(customhandler.Handle(tick)))
	s.Register("Raw", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("all good, not JSON"))
	}))
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "echohandler:", err)
		os.Exit(1)
	}
}
