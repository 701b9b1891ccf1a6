//go:build linux

package faults_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel SIGKILL the child when the thread that
// started it (normally: the test binary) dies, so no child outlives a
// crashed test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
