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
