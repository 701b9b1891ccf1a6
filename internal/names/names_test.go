package names

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDerivedNames(t *testing.T) {
	assert.Equal(t, "redisson_lock__channel:{orders}", LockChannel("orders"))
	assert.Equal(t, "redisson_lock__channel:{user42}:cart", LockChannel("{user42}:cart"))
	assert.Equal(t, "p:a{b", Prefix("p", "a{b"), "the naive contains('{') test")
	assert.Equal(t, "{orders}:s", Suffix("orders", "s"))
	assert.Equal(t, "{user42}:cart:s", Suffix("{user42}:cart", "s"))
	id := func(b []byte) []byte { return append(b, "0123"...) }
	assert.Equal(t, "goredisson_fence:{orders}:0123", Fence("orders", id))
	assert.Equal(t, "goredisson_fence:{user42}:cart:0123", Fence("{user42}:cart", id))
}

func TestSlot(t *testing.T) {
	// Values from Redis' CLUSTER KEYSLOT.
	assert.Equal(t, uint16(12182), Slot("foo"))
	assert.Equal(t, uint16(5061), Slot("bar"))
	assert.Equal(t, Slot("user1000"), Slot("{user1000}.following"))
	assert.NotEqual(t, Slot("x"), Slot("{}x"), "an empty tag hashes the whole key")
	assert.Equal(t, Slot("orders"), Slot(Fence("orders", func(b []byte) []byte { return append(b, "ff"...) })))
}
