package customhandler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Port environment variables the host sets for the handler.
const (
	EnvPort       = "FUNCTIONS_CUSTOMHANDLER_PORT"
	EnvLegacyPort = "FUNCTIONS_HTTPWORKER_PORT"
)

// ErrNoPort means neither port variable is set: the process was not started
// by a Functions host.
var ErrNoPort = errors.New("neither " + EnvPort + " nor " + EnvLegacyPort + " is set; the handler must be started by a Functions host")

// Port returns the loopback port the host told the handler to listen on.
func Port(getenv func(string) string) (string, error) {
	for _, name := range []string{EnvPort, EnvLegacyPort} {
		if port := strings.TrimSpace(getenv(name)); port != "" {
			return port, nil
		}
	}
	return "", ErrNoPort
}

// ServerOptions configures a Server.
type ServerOptions struct {
	// Getenv reads the port variables (default os.Getenv).
	Getenv func(string) string
	// Log receives server messages (default os.Stderr).
	Log io.Writer
	// ShutdownTimeout bounds how long in-flight invocations may finish after
	// SIGTERM (default 30 s).
	ShutdownTimeout time.Duration
}

// Server routes POST /<FunctionName> to each function's handler.
type Server struct {
	opts      ServerOptions
	functions map[string]http.Handler
}

// NewServer returns a Server with no functions.
func NewServer(opts ServerOptions) *Server {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	return &Server{opts: opts, functions: map[string]http.Handler{}}
}

// refuse answers a request no function handles. The reason goes to the
// server's log (stderr) too: the host drops a non-2xx answer's Logs.
func (s *Server) refuse(w http.ResponseWriter, status int, reason string) {
	fmt.Fprintln(s.opts.Log, reason)
	writeResponse(w, status, Response{Logs: []string{reason}})
}

// Register routes function name to h. Function names are case-insensitive,
// as in the host; registering one twice is a programming error.
func (s *Server) Register(name string, h http.Handler) {
	key := strings.ToLower(name)
	if _, dup := s.functions[key]; dup {
		panic(fmt.Sprintf("customhandler: function %q registered twice", name))
	}
	s.functions[key] = h
}

// Handler is the server's routing handler: GET / answers readiness probes.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.Trim(r.URL.Path, "/")
		if name == "" {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				w.WriteHeader(http.StatusOK)
				return
			}
			s.refuse(w, http.StatusMethodNotAllowed, "error: "+r.Method+" / is not allowed; the host probes readiness with GET /")
			return
		}
		handler, ok := s.functions[strings.ToLower(name)]
		if !ok {
			s.refuse(w, http.StatusNotFound, fmt.Sprintf("error: no function named %q in this handler (have %s)", name, s.names()))
			return
		}
		handler.ServeHTTP(w, r)
	})
}

func (s *Server) names() string {
	if len(s.functions) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(s.functions)), ", ")
}

// Run listens on the host's port until ctx ends or the process gets SIGTERM
// or SIGINT, then stops accepting and lets in-flight invocations finish.
func (s *Server) Run(ctx context.Context) error {
	port, err := Port(s.opts.Getenv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return fmt.Errorf("listening on the host's port %s: %w", port, err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(s.opts.Log, "customhandler: listening on %s for %s\n", ln.Addr(), s.names())
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(s.opts.Log, "customhandler: shutting down, waiting up to %s for in-flight invocations\n", s.opts.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
