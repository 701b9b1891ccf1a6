//go:build !linux

package redistest

import (
	"errors"
	"os"
	"syscall"
)

// sysProcAttr: Pdeathsig exists only on Linux; elsewhere a server outlives a
// test binary that is killed before it can run Close.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func killProcessGroup(p *os.Process) error {
	err := p.Kill()
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}
