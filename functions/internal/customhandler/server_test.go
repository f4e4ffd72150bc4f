package customhandler

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

// startServer serves s on a real loopback listener, the way the host talks
// to the handler.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// syncBuffer is the handler's stderr: written by the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf.String()
	b.buf.Reset()
	return out
}

// TestServerAndHandle: the protocol's answers, and every failure's reason on
// stderr as well as in Logs, since the host drops a non-2xx answer's Logs
// and forwards stderr to traces.
func TestServerAndHandle(t *testing.T) {
	stderr := &syncBuffer{}
	s := NewServer(ServerOptions{Log: stderr})
	opts := HandlerOptions{LogMirror: stderr}
	s.Register("Provision", HandleWithOptions(func(ctx context.Context, inv *Invocation, log *Logger) error {
		body, err := inv.Message("msg")
		if err != nil {
			return err
		}
		ev, err := messages.Decode(body)
		if err != nil {
			return err
		}
		log.Printf("got %s delivery %d", ev.Type, inv.Metadata.DeliveryCount)
		switch ev.Subject {
		case "transient":
			return errors.New("ARM said 429")
		case "permanent":
			return NewPermanentError("nodepool %q not found", "np")
		case "panic":
			var m map[string]int
			m["boom"]++ // nil map write
		case "output":
			inv.SetOutput("out", map[string]string{"k": "v"})
			inv.SetReturnValue("done")
		case "badoutput":
			inv.SetOutput("out", func() {})
		}
		return nil
	}, opts))
	url := startServer(t, s)

	event := func(subject string) string {
		body, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "e1", "source": "test", "type": "com.karpfunc.provision.v1", "subject": subject})
		data, _ := json.Marshal(map[string]string{"msg": string(body)})
		return `{"Data":` + string(data) + `,"Metadata":{"DeliveryCount":"2","MessageId":"\"m\""}}`
	}
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantLogs   []string // substrings, in order
		wantOut    string
		wantReturn any
	}{
		{name: "readiness", method: "GET", path: "/", wantStatus: 200},
		{name: "success", method: "POST", path: "/Provision", body: event("ok"), wantStatus: 200,
			wantLogs: []string{"got com.karpfunc.provision.v1 delivery 2"}},
		{name: "function names are case-insensitive", method: "POST", path: "/provision", body: event("ok"), wantStatus: 200},
		{name: "outputs and return value", method: "POST", path: "/Provision", body: event("output"), wantStatus: 200,
			wantOut: `{"out":{"k":"v"}}`, wantReturn: "done"},
		{name: "transient error is 500 with the reason", method: "POST", path: "/Provision", body: event("transient"), wantStatus: 500,
			wantLogs: []string{"got ", "error: ARM said 429"}},
		{name: "permanent error is 400", method: "POST", path: "/Provision", body: event("permanent"), wantStatus: 400,
			wantLogs: []string{"got ", `error: permanent: nodepool "np" not found`}},
		{name: "invalid message is 400", method: "POST", path: "/Provision",
			body: `{"Data":{"msg":"{\"specversion\":\"0.3\"}"}}`, wantStatus: 400,
			wantLogs: []string{`error: invalid message: specversion is "0.3"; want "1.0"`}},
		{name: "missing binding is 400", method: "POST", path: "/Provision", body: `{"Data":{"other":"x"}}`, wantStatus: 400,
			wantLogs: []string{`error: invalid message: no binding "msg" in the request Data (have other)`}},
		{name: "bad envelope is 400", method: "POST", path: "/Provision", body: `not json`, wantStatus: 400,
			wantLogs: []string{"error: invalid message: request body is not a Functions invocation envelope"}},
		{name: "panic is 500 with the stack", method: "POST", path: "/Provision", body: event("panic"), wantStatus: 500,
			wantLogs: []string{"got ", "error: panic: assignment to entry in nil map"}},
		{name: "unencodable output is 500", method: "POST", path: "/Provision", body: event("badoutput"), wantStatus: 500,
			wantLogs: []string{"got ", "error: encoding the response"}},
		{name: "unknown function is 404 naming the known ones", method: "POST", path: "/Sweep", body: event("ok"), wantStatus: 404,
			wantLogs: []string{`error: no function named "Sweep" in this handler (have provision)`}},
		{name: "GET on a function is 405", method: "GET", path: "/Provision", wantStatus: 405,
			wantLogs: []string{"error: method GET not allowed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Azure-Functions-InvocationId", "inv-1")
			stderr.take()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d; want %d; body %s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.path == "/" {
				return
			}
			var r struct {
				Outputs     json.RawMessage
				Logs        []string
				ReturnValue any
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatalf("response is not JSON: %v: %s", err, body)
			}
			if len(r.Logs) < len(tt.wantLogs) {
				t.Fatalf("Logs = %q; want %q", r.Logs, tt.wantLogs)
			}
			for i, want := range tt.wantLogs {
				if !strings.Contains(r.Logs[i], want) {
					t.Errorf("Logs[%d] = %q; want it to contain %q", i, r.Logs[i], want)
				}
			}
			if resp.StatusCode/100 != 2 && len(tt.wantLogs) > 0 {
				if reason, got := tt.wantLogs[len(tt.wantLogs)-1], stderr.take(); !strings.Contains(got, reason) {
					t.Errorf("stderr = %q; want the failure's reason %q (the host drops a %d's Logs)", got, reason, resp.StatusCode)
				}
			}
			if tt.name == "panic is 500 with the stack" && !strings.Contains(strings.Join(r.Logs, "\n"), "goroutine") {
				t.Errorf("panic log has no stack: %q", r.Logs)
			}
			if tt.wantOut != "" && string(r.Outputs) != tt.wantOut {
				t.Errorf("Outputs = %s; want %s", r.Outputs, tt.wantOut)
			}
			if r.ReturnValue != tt.wantReturn {
				t.Errorf("ReturnValue = %v; want %v", r.ReturnValue, tt.wantReturn)
			}
		})
	}
}

func TestPort(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
		err  error
	}{
		{name: "custom handler port", env: map[string]string{EnvPort: "7071", EnvLegacyPort: "1"}, want: "7071"},
		{name: "legacy port", env: map[string]string{EnvLegacyPort: "7072"}, want: "7072"},
		{name: "none", env: map[string]string{}, err: ErrNoPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Port(func(k string) string { return tt.env[k] })
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("Port = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestRunWithoutPort(t *testing.T) {
	s := NewServer(ServerOptions{Getenv: func(string) string { return "" }, Log: io.Discard})
	if err := s.Run(context.Background()); !errors.Is(err, ErrNoPort) {
		t.Fatalf("Run = %v; want ErrNoPort", err)
	}
}

// TestGracefulShutdown: an invocation in flight when the server is told to
// stop still gets its answer, so the host does not see a failure for work
// that completed.
func TestGracefulShutdown(t *testing.T) {
	started := make(chan struct{})
	s := NewServer(ServerOptions{Log: io.Discard, ShutdownTimeout: 5 * time.Second})
	s.Register("Slow", HandleWithOptions(func(ctx context.Context, inv *Invocation, log *Logger) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		return nil
	}, HandlerOptions{LogMirror: io.Discard}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	status := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/Slow", "application/json", strings.NewReader(`{}`))
		if err != nil {
			status <- -1
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	<-started
	cancel()
	if got := <-status; got != 200 {
		t.Errorf("in-flight invocation status = %d; want 200", got)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
