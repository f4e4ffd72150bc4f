//go:build !linux

package controlplane

import "syscall"

// sysProcAttr puts each child in its own process group. Only Linux has a
// parent-death signal; elsewhere a killed parent can leave children behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
