package localenv

import (
	"bufio"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stopProcess sends SIGTERM, waits up to grace, then SIGKILLs.
func stopProcess(cmd *exec.Cmd, grace time.Duration) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}

var logMu sync.Mutex

// prefixed writes each line of a child's output to w with a name prefix.
func prefixed(w io.Writer, name string) io.Writer {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			logMu.Lock()
			_, _ = io.WriteString(w, name+" | "+sc.Text()+"\n")
			logMu.Unlock()
		}
	}()
	return pw
}
