//go:build !unix

package main

import (
	"os"
	"syscall"
)

// Outside Unix there are no process groups or job control: signals go to
// the command's process, and only an interrupt is forwarded.
var (
	forwardedSignals  = []os.Signal{os.Interrupt}
	terminalSignals   = []os.Signal{}
	jobControlSignals = []os.Signal{}
)

var (
	sigTERM os.Signal = os.Interrupt
	sigKILL os.Signal = os.Kill
	sigTSTP os.Signal = syscall.Signal(-1)
	sigCONT os.Signal = syscall.Signal(-2)
)

func childAttr(bool) *syscall.SysProcAttr { return nil }

func signalCommand(p *os.Process, sig os.Signal, _ bool) error {
	if sig == os.Kill {
		return p.Kill()
	}
	return p.Signal(sig)
}

func stopSelf() {}

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

func signalStatus(os.Signal) int { return exitSignalBase + 2 }

func signalName(sig os.Signal) string { return sig.String() }
