//go:build linux

package driver

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel SIGKILL the JVM when the OS thread that
// started it exits (normally: when the test binary dies).
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
