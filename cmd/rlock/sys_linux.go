package main

import "syscall"

// setPdeathsig makes the kernel send the command SIGTERM if rlock dies
// (even by SIGKILL), so it does not go on without the lock.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
