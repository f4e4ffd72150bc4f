package controlplane

import (
	"errors"
	"fmt"
	"github.com/karpfunc/karpfunc/internal/logwriter"
	"os"
	"os/exec"
	"runtime"
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
	out  *logwriter.Lines

	done     chan struct{} // closed when the process has exited and been reaped
	exitErr  error         // valid after done
	stopping bool          // set (under mu) before Stop signals it
	mu       sync.Mutex
}

// startProcess starts bin with args; its output goes line by line to log
// (prefixed with its name) and to a tail kept for error messages.
func startProcess(name, bin string, args, env []string, log *logwriter.Synced) (*process, error) {
	proc := &process{name: name, out: logwriter.NewLines(log, "["+name+"] ", tailLines), done: make(chan struct{})}
	proc.cmd = exec.Command(bin, args...)
	proc.cmd.Env = append(os.Environ(), env...)
	proc.cmd.Stdout = proc.out
	proc.cmd.Stderr = proc.out
	proc.cmd.SysProcAttr = sysProcAttr()
	if err := onStarterThread(proc.cmd.Start); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	go func() {
		err := proc.cmd.Wait()
		proc.out.Flush()
		proc.mu.Lock()
		proc.exitErr = err
		proc.mu.Unlock()
		close(proc.done)
	}()
	return proc, nil
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
	return fmt.Errorf("%s %s (pid %d); last output:\n%s", p.name, status, p.cmd.Process.Pid, p.out.Tail())
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
			for call := range starterCh {
				call()
			}
		}()
	})
	errc := make(chan error, 1)
	starterCh <- func() { errc <- start() }
	return <-errc
}
