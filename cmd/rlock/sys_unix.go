//go:build unix

package main

import (
	"os"
	"syscall"
)

// forwardedSignals are passed on to the command while it runs (and end the
// wait for the lock before it runs).
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// terminalSignals reach a --foreground command straight from the terminal
// (it shares rlock's process group), so rlock does not forward them again.
var terminalSignals = []os.Signal{syscall.SIGINT, syscall.SIGQUIT}

// jobControlSignals are handled while a command runs in its own process
// group: SIGTSTP stops the command's group and then rlock, SIGCONT resumes
// the command's group.
var jobControlSignals = []os.Signal{syscall.SIGTSTP, syscall.SIGCONT}

const (
	sigTERM = syscall.SIGTERM
	sigKILL = syscall.SIGKILL
	sigTSTP = syscall.SIGTSTP
	sigCONT = syscall.SIGCONT
)

// childAttr puts the command in a process group of its own (unless
// foreground), and asks the kernel to send it SIGTERM if rlock dies.
func childAttr(foreground bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: !foreground}
	setPdeathsig(a)
	return a
}

// signalCommand sends sig to the command's process group (group) or to its
// process only.
func signalCommand(p *os.Process, sig os.Signal, group bool) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return p.Signal(sig)
	}
	if group {
		return syscall.Kill(-p.Pid, s)
	}
	return syscall.Kill(p.Pid, s)
}

// stopSelf stops rlock as SIGTSTP's default action would.
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

// exitStatus is the shell's view of how a process ended: its exit code, or
// 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalStatus is the exit code for rlock interrupted by sig: 128+N.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return exitSignalBase + int(s)
	}
	return exitSignalBase + 2
}

// signalName returns "SIGTERM" etc.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTSTP:
		return "SIGTSTP"
	case syscall.SIGCONT:
		return "SIGCONT"
	}
	return sig.String()
}
