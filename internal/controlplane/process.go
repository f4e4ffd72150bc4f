package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tailLines is how many output lines each process keeps for error messages.
const tailLines = 40

// process is one child of the control plane.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *lineWriter

	done     chan struct{} // closed when the process has exited and been reaped
	exitErr  error         // valid after done
	stopping bool          // set (under mu) before Stop signals it
	mu       sync.Mutex
}

// startProcess starts bin with args; its output goes line by line to log
// (prefixed with its name) and to a tail kept for error messages.
func startProcess(name, bin string, args, env []string, log *syncWriter) (*process, error) {
	p := &process{name: name, out: &lineWriter{prefix: "[" + name + "] ", log: log}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := onStarterThread(p.cmd.Start); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.out.flush()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited, and why, with its last lines
// of output so the cause is in the error itself.
func (p *process) exited() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	status := "exited"
	if p.exitErr != nil {
		status = p.exitErr.Error()
	}
	return fmt.Errorf("%s %s (pid %d); last output:\n%s", p.name, status, p.cmd.Process.Pid, p.out.tail())
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits until the process has been reaped.
func (p *process) stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	// The child leads its own process group, so -pid reaches anything it forked.
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending SIGTERM to %s (pid %d): %w", p.name, pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending SIGKILL to %s (pid %d): %w", p.name, pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit 10s after SIGKILL", p.name, pid)
	}
}

// unexpectedExit is exited() for a process nobody asked to stop.
func (p *process) unexpectedExit() error {
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		return nil
	}
	return p.exited()
}

// The parent-death signal fires when the OS thread that forked the child
// exits, not the process. Go may retire threads (one whose goroutine exited
// while locked), so every child is forked from one goroutine locked to its
// thread for the life of the program: that thread dies only with the process.
var (
	starterOnce sync.Once
	starterCh   chan func()
)

func onStarterThread(start func() error) error {
	starterOnce.Do(func() {
		starterCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for f := range starterCh {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	starterCh <- func() { errc <- start() }
	return <-errc
}

// syncWriter serializes writes from several processes into one io.Writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// lineWriter splits a process's output into lines, forwards each with a
// prefix, and keeps the last tailLines of them.
type lineWriter struct {
	prefix string
	log    *syncWriter

	mu      sync.Mutex
	partial []byte
	lines   []string // ring of the last tailLines lines
	next    int
	full    bool
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	// A process that never prints a newline must not grow memory forever.
	if len(w.partial) > 64<<10 {
		w.line(string(w.partial))
		w.partial = nil
	}
	return len(b), nil
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.line(string(w.partial))
		w.partial = nil
	}
}

// line records one line; callers hold w.mu. Errors writing to the log are
// ignored: losing log output must never kill a control-plane process.
func (w *lineWriter) line(s string) {
	if w.lines == nil {
		w.lines = make([]string, tailLines)
	}
	w.lines[w.next] = s
	w.next = (w.next + 1) % tailLines
	if w.next == 0 {
		w.full = true
	}
	if w.log != nil {
		_, _ = w.log.Write([]byte(w.prefix + s + "\n"))
	}
}

func (w *lineWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lines == nil {
		return "  (no output)"
	}
	var ordered []string
	if w.full {
		ordered = append(ordered, w.lines[w.next:]...)
	}
	ordered = append(ordered, w.lines[:w.next]...)
	return "  " + strings.Join(ordered, "\n  ")
}
