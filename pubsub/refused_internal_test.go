package pubsub

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
)

// TestRefusedForGood: which error replies to a SUBSCRIBE fail the waiters
// (the server will say the same again) and which send it again on a new
// connection (the topology's state). The replies are real ones, made by
// a script, so rueidis parses them as it parses the server's.
func TestRefusedForGood(t *testing.T) {
	srv := redistest.Standalone(t)
	rc, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	reply := func(text string) error {
		return rc.Do(context.Background(), rc.B().Eval().Script("return redis.error_reply(ARGV[1])").Numkeys(0).Arg(text).Build()).Error()
	}
	for text, forGood := range map[string]bool{
		"NOPERM User u has no permissions to run the 'ssubscribe' command": true,
		"ERR unknown command 'SSUBSCRIBE'":                                 true,
		"MOVED 1666 127.0.0.1:7001":                                        false,
		"ASK 1666 127.0.0.1:7001":                                          false,
		"CLUSTERDOWN Hash slot not served":                                 false,
		"TRYAGAIN Multiple keys request during rehashing of slot":          false,
		"LOADING Redis is loading the dataset in memory":                   false,
	} {
		err := reply(text)
		require.Error(t, err, text)
		assert.Equal(t, forGood, refusedForGood(err), text)
	}
	assert.False(t, refusedForGood(context.Canceled), "not a server reply")
}

// Join refuses an entry that is going (closing: its receive loop is
// ending, so a joiner would never hear a message), and takes it again
// once it is not.
func TestJoinRefusesClosingEntry(t *testing.T) {
	srv := redistest.Standalone(t)
	rc, err := srv.Client()
	require.NoError(t, err)
	h := New(rc, false, nil)
	t.Cleanup(func() { h.Close(); rc.Close() })
	s, err := h.Subscribe(context.Background(), "c")
	require.NoError(t, err)
	defer s.Release()
	h.mu.Lock()
	e := h.entries["c"]
	e.closing = true
	h.mu.Unlock()
	assert.Nil(t, h.Join("c"))
	h.mu.Lock()
	e.closing = false
	h.mu.Unlock()
	j := h.Join("c")
	require.NotNil(t, j)
	j.Release()
}
