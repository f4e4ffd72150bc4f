package controlplane

import "syscall"

// sysProcAttr puts each child in its own process group (so Stop can signal it
// and anything it forks, and a terminal's Ctrl-C reaches only the test binary,
// which then stops the children in order) and asks the kernel to SIGKILL it
// if the thread that started it dies, so a crashed or killed test binary
// leaves nothing behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
