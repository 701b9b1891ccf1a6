//go:build !linux

package faults_test

import "os/exec"

// dieWithParent is a no-op where Pdeathsig does not exist; the holder child
// still exits when its stdin (a pipe from the test) reaches EOF.
func dieWithParent(*exec.Cmd) {}
