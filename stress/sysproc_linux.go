//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel SIGKILL a worker when the coordinator's
// thread that started it dies, so no worker outlives a crashed run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
