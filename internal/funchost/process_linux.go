package funchost

import "syscall"

// sysProcAttr kills the handler if the host process dies without stopping
// it (a test binary killed by its timeout, say), so no orphan keeps a port.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
