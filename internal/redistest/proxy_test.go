package redistest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCommand(t *testing.T) {
	cmd := []byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
	args, n, err := parseCommand(append(cmd, "*1\r\n"...))
	require.NoError(t, err)
	assert.Equal(t, []string{"GET", "k"}, args)
	assert.Equal(t, len(cmd), n)
	for i := range len(cmd) {
		_, _, err := parseCommand(cmd[:i])
		assert.ErrorIs(t, err, errIncomplete, "prefix of %d bytes", i)
	}
	_, _, err = parseCommand([]byte("PING\r\n"))
	assert.Error(t, err)
	assert.False(t, errors.Is(err, errIncomplete))
	_, _, err = parseCommand([]byte("*1\r\n$2\r\nabc\r\n"))
	assert.Error(t, err)
}

// Through the proxy: commands pass; Stall holds traffic until Resume;
// DropReply cuts the connection after the server ran the command.
func TestProxy(t *testing.T) {
	s := Standalone(t)
	p := NewProxy(t, s.Addr)
	o := s.ClientOption()
	o.InitAddress = []string{p.Addr}
	o.DisableRetry = true
	c, err := rueidis.NewClient(o)
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, c.Do(ctx, c.B().Set().Key("proxied").Value("1").Build()).Error())

	// Stall: a command sent meanwhile gets no reply and does not reach
	// the server until Resume.
	conn, err := net.Dial("tcp", p.Addr)
	require.NoError(t, err)
	defer conn.Close()
	p.Stall()
	_, err = conn.Write([]byte("*2\r\n$4\r\nINCR\r\n$7\r\nproxied\r\n"))
	require.NoError(t, err)
	buf := make([]byte, 64)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = conn.Read(buf)
	var nerr net.Error
	require.ErrorAs(t, err, &nerr, "a stalled proxy delivered a reply")
	require.True(t, nerr.Timeout())
	got, err := s.DoString(ctx, "GET", "proxied")
	require.NoError(t, err)
	assert.Equal(t, "1", got, "a stalled proxy forwarded a command")
	p.Resume()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := conn.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, ":2\r\n", string(buf[:n]), "the stalled INCR ran after Resume")

	fired := p.DropReply(func(args []string) bool { return len(args) > 1 && args[0] == "INCRBY" })
	err = c.Do(ctx, c.B().Incrby().Key("proxied").Increment(40).Build()).Error()
	require.Error(t, err, "the reply should have been dropped")
	ev := <-fired
	require.NoError(t, ev.Err)
	assert.Equal(t, []string{"INCRBY", "proxied", "40"}, ev.Args)
	assert.True(t, bytes.HasSuffix(ev.Discarded, []byte(":42\r\n")), "%q", ev.Discarded)
	got, err = s.DoString(ctx, "GET", "proxied")
	require.NoError(t, err)
	assert.Equal(t, "42", got, "the server did not run the command whose reply was dropped")
	require.GreaterOrEqual(t, p.Accepted(), 1)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
}
