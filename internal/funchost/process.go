package funchost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/karpfunc/karpfunc/internal/localbus"
)

// supervisor runs the handler process, as the Functions host does: it starts
// it on a free loopback port, waits until it answers GET /, and starts it
// again whenever it exits until stop is called.
type supervisor struct {
	path           string
	args           []string
	dir            string
	env            []string
	output         io.Writer
	log            *log.Logger
	startupTimeout time.Duration
	stopTimeout    time.Duration

	mu       sync.Mutex
	live     *instance // nil while (re)starting
	changed  chan struct{}
	stopping bool
	restarts int
	stopCh   chan struct{} // closed by stop
	done     chan struct{} // closed when watch returns
}

type instance struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	exited chan struct{}
	err    error // set before exited closes
}

// ErrHandlerStopped is returned by endpoint once the host is stopping.
var ErrHandlerStopped = errors.New("funchost: the handler is stopped")

// start launches the handler and waits for it; ctx bounds the wait.
func (s *supervisor) start(ctx context.Context) error {
	s.changed = make(chan struct{})
	s.stopCh = make(chan struct{})
	s.done = make(chan struct{})
	inst, err := s.launch(ctx)
	if err != nil {
		close(s.done)
		return err
	}
	s.setLive(inst)
	go s.watch(inst)
	return nil
}

// watch restarts the handler each time it exits, with a growing pause so a
// handler that crashes at startup does not spin.
func (s *supervisor) watch(inst *instance) {
	defer close(s.done)
	backoff := 100 * time.Millisecond
	for {
		<-inst.exited
		s.mu.Lock()
		s.live = nil
		s.broadcast()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		s.log.Printf("handler (pid %d) exited: %v; restarting", inst.cmd.Process.Pid, inst.err)
		for {
			s.mu.Lock()
			s.restarts++
			stopping := s.stopping
			s.mu.Unlock()
			if stopping {
				return
			}
			next, err := s.launch(context.Background())
			if err == nil {
				if !s.setLive(next) {
					// stop ran while this one was starting and did not see it.
					s.terminate(next)
					return
				}
				inst = next
				backoff = 100 * time.Millisecond
				break
			}
			s.log.Printf("restarting the handler: %v; next attempt in %s", err, backoff)
			select {
			case <-s.stopCh:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
		}
	}
}

// setLive publishes inst, unless the supervisor is stopping.
func (s *supervisor) setLive(inst *instance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.live = inst
	s.broadcast()
	return true
}

func (s *supervisor) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// launch starts one handler process and waits for it to answer.
func (s *supervisor) launch(ctx context.Context) (*instance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.path, s.args...)
	cmd.Dir = s.dir
	cmd.Env = append(append([]string(nil), s.env...),
		"FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port),
		"FUNCTIONS_CUSTOMHANDLER_WORKER_ID="+localbus.NewGUID())
	cmd.Stdout = s.output
	cmd.Stderr = s.output
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the handler %s: %w", s.path, err)
	}
	inst := &instance{cmd: cmd, base: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	go func() {
		inst.err = cmd.Wait()
		if inst.err == nil {
			inst.err = errors.New("exit status 0")
		}
		close(inst.exited)
	}()
	if err := s.waitReady(ctx, inst); err != nil {
		_ = cmd.Process.Kill()
		<-inst.exited
		return nil, err
	}
	s.log.Printf("handler %s (pid %d) is ready on %s", s.path, cmd.Process.Pid, inst.base)
	return inst, nil
}

// waitReady polls GET / until any HTTP response arrives, as the host does.
func (s *supervisor) waitReady(ctx context.Context, inst *instance) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(s.startupTimeout)
	for {
		resp, err := client.Get(inst.base + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-inst.exited:
			return fmt.Errorf("the handler %s exited before it listened on %s: %w", s.path, inst.base, inst.err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the handler %s: %w", s.path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the handler %s did not answer GET %s/ within %s", s.path, inst.base, s.startupTimeout)
		}
	}
}

// endpoint returns the live handler's base URL, waiting through a restart.
func (s *supervisor) endpoint(ctx context.Context) (string, error) {
	for {
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return "", ErrHandlerStopped
		}
		if s.live != nil {
			base := s.live.base
			s.mu.Unlock()
			return base, nil
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-changed:
		}
	}
}

// stop sends SIGTERM, waits stopTimeout for the handler to finish its
// in-flight invocations, then kills it.
func (s *supervisor) stop() {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.stopping = true
	close(s.stopCh)
	inst := s.live
	s.broadcast()
	s.mu.Unlock()
	if inst != nil {
		s.terminate(inst)
	}
	<-s.done
}

func (s *supervisor) terminate(inst *instance) {
	_ = inst.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-inst.exited:
	case <-time.After(s.stopTimeout):
		s.log.Printf("handler (pid %d) did not exit %s after SIGTERM; killing it", inst.cmd.Process.Pid, s.stopTimeout)
		_ = inst.cmd.Process.Kill()
		<-inst.exited
	}
}

func (s *supervisor) restartCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// pid returns the live handler's process id (0: none).
func (s *supervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		return 0
	}
	return s.live.cmd.Process.Pid
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for the handler: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
