//go:build !linux

package main

import "os"

// isTerminal reports whether f looks like a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// terminalWidth returns 0: unknown.
func terminalWidth(*os.File) int { return 0 }

// inForeground returns false: unknown.
func inForeground(*os.File) bool { return false }
