package owner

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGoroutineIDFastPath(t *testing.T) {
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		assert.GreaterOrEqual(t, goidOffset, 0, "the goroutine id offset was not found: every lock call pays for runtime.Stack")
	}
}

func TestGoroutineID(t *testing.T) {
	id := goroutineID()
	assert.Equal(t, slowGoroutineID(), id)
	assert.Positive(t, id)
	assert.Equal(t, id, goroutineID())
	other := make(chan int64)
	for range 100 {
		go func() {
			assert.Equal(t, slowGoroutineID(), goroutineID())
			other <- goroutineID()
		}()
		assert.NotEqual(t, id, <-other)
	}
}

func TestOf(t *testing.T) {
	id, explicit := Of(context.Background())
	assert.Equal(t, Goroutine(), id)
	assert.False(t, explicit)
	id, explicit = Of(With(context.Background(), -7))
	assert.Equal(t, int64(-7), id)
	assert.True(t, explicit)
}

func BenchmarkGoroutineID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		goroutineID()
	}
}

func BenchmarkSlowGoroutineID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		slowGoroutineID()
	}
}

func TestParseField(t *testing.T) {
	for field, want := range map[string]struct {
		client string
		id     int64
		ok     bool
	}{
		"0b6c7d2e-9f3a-4e1b-8c5d-1a2b3c4d5e6f:57":       {"0b6c7d2e-9f3a-4e1b-8c5d-1a2b3c4d5e6f", 57, true},
		"0b6c7d2e-9f3a-4e1b-8c5d-1a2b3c4d5e6f:57:write": {"0b6c7d2e-9f3a-4e1b-8c5d-1a2b3c4d5e6f", 57, true},
		"c:-3":   {"c", -3, true},
		"mode":   {"", 0, false},
		":5":     {"", 0, false},
		"c:x":    {"", 0, false},
		"":       {"", 0, false},
		"a:b:c":  {"", 0, false},
		"a:1:rd": {"", 0, false},
	} {
		c, id, ok := ParseField(field)
		if c != want.client || id != want.id || ok != want.ok {
			t.Errorf("ParseField(%q) = %q, %d, %v; want %q, %d, %v", field, c, id, ok, want.client, want.id, want.ok)
		}
	}
}
