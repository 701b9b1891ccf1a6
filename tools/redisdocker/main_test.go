package main

import (
	"testing"
	"time"
)

// TestProbe: the probe answers within its bound whether or not a Docker
// engine runs here, and never panics (testcontainers may, without Docker).
func TestProbe(t *testing.T) {
	start := time.Now()
	ok := probe()
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("probe took %v", d)
	}
	t.Logf("Docker engine answers: %v", ok)
}
