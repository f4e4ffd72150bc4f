package localenv

import (
	"os/exec"
	"syscall"
)

// setPdeathsig kills the child if this process dies first, so a crashed test
// binary leaves no relay behind.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
