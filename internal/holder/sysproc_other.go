//go:build !linux

package holder

import "os/exec"

// dieWithParent is a no-op where Pdeathsig does not exist; the child still
// exits when its stdin (the parent's pipe) closes.
func dieWithParent(*exec.Cmd) {}
