//go:build !linux

package localenv

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
