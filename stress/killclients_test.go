package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
)

// killClients marks the kill's time before any connection is closed: at
// the mark both the subscriber and the command connection still exist, so
// an error a worker sees at the instant of the kill is never earlier than
// the mark (the soak of 1cb6c15 failed on one such Redisson error). After
// it, both connections are gone and rc's own is kept.
func TestKillClientsMarksBeforeTheKill(t *testing.T) {
	srv := redistest.Standalone(t)
	rc, err := srv.Client()
	require.NoError(t, err)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	dialRaw := func(cmd string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", srv.Addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = c.Write([]byte(cmd))
		require.NoError(t, err)
		r := bufio.NewReader(c)
		_, err = r.ReadString('\n') // first line of the reply
		require.NoError(t, err)
		return c, r
	}
	sub, subR := dialRaw("*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nkillx\r\n")
	normal, normalR := dialRaw("*1\r\n$4\r\nPING\r\n")
	clients := func(typ string) int {
		s, err := rc.Do(ctx, rc.B().Arbitrary("CLIENT", "LIST", "TYPE").Args(typ).Build()).ToString()
		require.NoError(t, err)
		n := 0 // RESP3 gives a verbatim string: "txt:" before the first line
		for _, line := range strings.Split(strings.TrimPrefix(s, "txt:"), "\n") {
			if strings.HasPrefix(line, "id=") {
				n++
			}
		}
		return n
	}

	var marks []int64
	var atMark [2]int
	before := time.Now().UnixNano()
	n, err := killClients(ctx, rc, "normal", func(tm int64) {
		marks = append(marks, tm)
		atMark = [2]int{clients("pubsub"), clients("normal")}
	})
	require.NoError(t, err)
	require.Len(t, marks, 1)
	require.GreaterOrEqual(t, marks[0], before)
	require.Equal(t, 1, atMark[0], "the subscriber was closed before the mark")
	require.Equal(t, 2, atMark[1], "a command connection was closed before the mark (rc's own and the raw one expected)")
	require.EqualValues(t, 1, n, "normal connections killed")
	require.Zero(t, clients("pubsub"))
	require.Equal(t, 1, clients("normal"), "only rc's own connection is left")
	for _, c := range []struct {
		conn net.Conn
		r    *bufio.Reader
	}{{sub, subR}, {normal, normalR}} {
		require.NoError(t, c.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		for {
			if _, err := c.r.ReadString('\n'); err != nil {
				var ne net.Error
				if errors.As(err, &ne) {
					require.False(t, ne.Timeout(), "connection still open after the kill")
				}
				break
			}
		}
	}
}
