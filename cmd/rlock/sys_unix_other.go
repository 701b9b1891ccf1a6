//go:build unix && !linux

package main

import "syscall"

// setPdeathsig: only Linux can signal a child when its parent dies.
func setPdeathsig(*syscall.SysProcAttr) {}
