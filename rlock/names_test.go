package rlock

import (
	"context"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
)

func TestDerivedNames(t *testing.T) {
	assert.Equal(t, "redisson_lock__channel:{orders}", ChannelName("orders"))
	assert.Equal(t, "redisson_lock__channel:{user42}:cart", ChannelName("{user42}:cart"))
	// The naive contains("{") test: no braces added even for a broken tag.
	assert.Equal(t, "redisson_lock__channel:a{b", ChannelName("a{b"))
	id := "0123456789abcdef0123456789abcdef"
	assert.Equal(t, "redisson_unlock_latch:{orders}:"+id, LatchName("orders", id))
	assert.Equal(t, "redisson_unlock_latch:{user42}:cart:"+id, LatchName("{user42}:cart", id))
}

func TestSlot(t *testing.T) {
	// Values from Redis' CLUSTER KEYSLOT.
	assert.Equal(t, uint16(12182), Slot("foo"))
	assert.Equal(t, uint16(5061), Slot("bar"))
	assert.Equal(t, Slot("user1000"), Slot("{user1000}.following"))
	assert.Equal(t, Slot("{}x"), Slot("{}x"))
	assert.NotEqual(t, Slot("x"), Slot("{}x"), "an empty tag hashes the whole key")
}

func TestCheckName(t *testing.T) {
	for _, name := range []string{"a", "orders:42", "{user42}:cart", "x}{y}", "héllo", "\xff\xfe"} {
		assert.NoError(t, checkName(name, true), name)
	}
	for _, name := range []string{"a{b", "{}x", "{", "ab{"} {
		err := checkName(name, true)
		assert.True(t, errors.Is(err, ErrInvalidName), "%q: %v", name, err)
		assert.NoError(t, checkName(name, false), "%q is fine outside a cluster", name)
	}
	assert.ErrorIs(t, checkName("", false), ErrInvalidName)
}

func TestNewLatchName(t *testing.T) {
	assert.Regexp(t, `^redisson_unlock_latch:\{orders\}:[0-9a-f]{32}$`, newLatchName("orders"))
	assert.Regexp(t, `^redisson_unlock_latch:\{user42\}:cart:[0-9a-f]{32}$`, newLatchName("{user42}:cart"))
	a := newLatchName("x")
	assert.Equal(t, LatchName("x", a[len(a)-32:]), a)
	assert.NotEqual(t, a, newLatchName("x"))
}

func TestRequestID(t *testing.T) {
	a, b := requestID(), requestID()
	assert.Regexp(t, "^[0-9a-f]{32}$", a)
	assert.NotEqual(t, a, b)
}

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

func TestIsRetryable(t *testing.T) {
	assert.False(t, isRetryable(nil))
	assert.False(t, isRetryable(rueidis.Nil), "a nil reply (not the owner) is an answer, never retried")
	assert.False(t, isRetryable(rueidis.ErrClosing))
	assert.True(t, isRetryable(io.EOF))
	assert.True(t, isRetryable(context.DeadlineExceeded))
}

func TestFieldCache(t *testing.T) {
	c := &Client{id: "11111111-2222-4333-8444-555555555555"}
	assert.Equal(t, c.id+":7", c.field(7))
	assert.Equal(t, c.id+":7", c.field(7))
	assert.Equal(t, c.id+":263", c.field(263), "same cache slot as 7, other owner")
	assert.Equal(t, c.id+":7", c.field(7))
	assert.Equal(t, c.id+":-1", c.field(-1))
	assert.Equal(t, c.id+":9223372036854775807", c.field(9223372036854775807))
}
