//go:build !linux

package funchost

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
