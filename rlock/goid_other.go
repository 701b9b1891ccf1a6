//go:build !amd64 && !arm64

package rlock

func goroutineID() int64 { return slowGoroutineID() }

const goidOffset = -1
