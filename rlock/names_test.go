package rlock

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goredisson/locks/internal/names"
)

func TestDerivedNames(t *testing.T) {
	assert.Equal(t, "redisson_lock__channel:{orders}", ChannelName("orders"))
	assert.Equal(t, "redisson_lock__channel:{user42}:cart", ChannelName("{user42}:cart"))
	// The naive contains("{") test: no braces added even for a broken tag.
	assert.Equal(t, "redisson_lock__channel:a{b", ChannelName("a{b"))
}

func TestSlot(t *testing.T) {
	// Values from Redis' CLUSTER KEYSLOT.
	assert.Equal(t, uint16(12182), names.Slot("foo"))
	assert.Equal(t, uint16(5061), names.Slot("bar"))
	assert.Equal(t, names.Slot("user1000"), names.Slot("{user1000}.following"))
	assert.Equal(t, names.Slot("{}x"), names.Slot("{}x"))
	assert.NotEqual(t, names.Slot("x"), names.Slot("{}x"), "an empty tag hashes the whole key")
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

func TestFieldCache(t *testing.T) {
	c := &Client{id: "11111111-2222-4333-8444-555555555555"}
	assert.Equal(t, c.id+":7", c.field(7))
	assert.Equal(t, c.id+":7", c.field(7))
	assert.Equal(t, c.id+":263", c.field(263), "same cache slot as 7, other owner")
	assert.Equal(t, c.id+":7", c.field(7))
	assert.Equal(t, c.id+":-1", c.field(-1))
	assert.Equal(t, c.id+":9223372036854775807", c.field(9223372036854775807))
}
