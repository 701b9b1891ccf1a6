//go:build !linux

package main

import "os/exec"

// dieWithParent is a no-op where Pdeathsig does not exist; a worker still
// stops when its stdin (a pipe from the coordinator) reaches EOF.
func dieWithParent(*exec.Cmd) {}
