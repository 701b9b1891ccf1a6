package redistest

import (
	"errors"
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group, so killing the group
// also kills fork children (e.g. a replication RDB child), and asks the kernel
// to SIGKILL the server if the thread that started it dies. Go threads only
// exit when a goroutine that called runtime.LockOSThread ends without
// unlocking, which neither this package nor rueidis does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killProcessGroup(p *os.Process) error {
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
