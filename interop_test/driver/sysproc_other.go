//go:build !linux

package driver

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
