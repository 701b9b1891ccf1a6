package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Proxy is a loopback TCP proxy between Redis clients and one Redis server,
// for fault injection: it can stall all traffic without closing anything
// (Stall/Resume, or StallOn a chosen command), drop the reply to one chosen command and cut the client's
// connection (DropReply), or cut every connection (CloseConns).
//
// It parses the client-to-server stream as RESP commands (arrays of bulk
// strings, which is all rueidis sends) so that DropReply can pick a command;
// the server-to-client stream is forwarded as bytes.
type Proxy struct {
	// Addr is the 127.0.0.1:port clients connect to.
	Addr   string
	target string
	ln     net.Listener

	mu       sync.Mutex
	cond     *sync.Cond // signalled when stalled, inflight or closed change
	stalled  bool
	inflight int // writes under way (Stall waits for them)
	closed   bool
	conns    map[*proxyConn]struct{}
	rule     *dropRule
	stallOn  *stallRule
	accepted int

	wg sync.WaitGroup
}

// DropEvent reports a DropReply that fired.
type DropEvent struct {
	// Args is the command whose reply was dropped, e.g. ["EVALSHA", ...].
	Args []string
	// Discarded is everything the server sent on that connection after the
	// command was forwarded, up to the server closing it: the dropped reply
	// is at its end.
	Discarded []byte
	// Err is set when the proxy could not confirm that the server had run
	// the command (it did not close the connection in time).
	Err error
}

type dropRule struct {
	match func(args []string) bool
	fired chan DropEvent
}

type stallRule struct {
	match func(args []string) bool
	fired chan []string
}

type proxyConn struct {
	client, server net.Conn
	dropping       chan struct{} // closed: the server's bytes are no longer forwarded
	dropOnce       sync.Once
	downDone       chan struct{} // closed when the server-to-client copy has ended
	discarded      bytes.Buffer  // written by the server-to-client copy once dropping
}

// StartProxy listens on a free loopback port and forwards every connection
// to target (host:port). Close it when done.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy: %w", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: make(map[*proxyConn]struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// NewProxy is StartProxy for a test: it fails the test on error and closes
// the proxy in t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return p
}

// Stall stops forwarding in both directions on every connection, present
// and future, without closing any. When Stall returns, no more byte reaches
// either side until Resume. Bytes sent meanwhile are kept (in the proxy and
// the kernel's buffers) and delivered after Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
	for p.inflight > 0 {
		p.cond.Wait()
	}
}

// Resume undoes Stall.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.stalled = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// DropReply arms a one-shot fault: the next command for which match returns
// true is forwarded to the server, and then its connection is cut in a way
// that leaves the client without the reply while the server has certainly
// run the command. Replies are no longer forwarded on that connection, the
// proxy half-closes the server side and waits for the server to close it
// (Redis runs every command it has read before it sees the end of the
// stream), then closes the client side. The returned channel receives one
// DropEvent when that is done. Commands the client sent after the matched
// one on that connection are not forwarded.
func (p *Proxy) DropReply(match func(args []string) bool) <-chan DropEvent {
	r := &dropRule{match: match, fired: make(chan DropEvent, 1)}
	p.mu.Lock()
	p.rule = r
	p.mu.Unlock()
	return r.fired
}

// StallOn arms a one-shot fault: when a command for which match returns
// true reaches the proxy, everything before it on its connection is
// forwarded and the proxy then stalls (as Stall) before forwarding it. The
// returned channel receives the command's arguments. Resume undoes it.
func (p *Proxy) StallOn(match func(args []string) bool) <-chan []string {
	r := &stallRule{match: match, fired: make(chan []string, 1)}
	p.mu.Lock()
	p.stallOn = r
	p.mu.Unlock()
	return r.fired
}

// stallBefore reports whether args arms the StallOn rule, disarming it.
func (p *Proxy) stallBefore(args []string) *stallRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stallOn != nil && p.stallOn.match(args) {
		r := p.stallOn
		p.stallOn = nil
		return r
	}
	return nil
}

// CloseConns closes every current connection (both sides); the listener
// keeps accepting new ones.
func (p *Proxy) CloseConns() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Accepted returns how many client connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines to end. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	p.CloseConns()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("redistest: proxy: %w", err)
	}
	return nil
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = cc.Close()
			continue
		}
		c := &proxyConn{client: cc, server: sc, dropping: make(chan struct{}), downDone: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.accepted++
		p.wg.Add(2)
		p.mu.Unlock()
		go p.up(c)
		go p.down(c)
	}
}

func (c *proxyConn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
}

func (c *proxyConn) isDropping() bool {
	select {
	case <-c.dropping:
		return true
	default:
		return false
	}
}

// write forwards b to w unless the proxy is closed, waiting while it is
// stalled. It reports false when the proxy is closed or the write failed.
func (p *Proxy) write(w net.Conn, b []byte) bool {
	p.mu.Lock()
	for p.stalled && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.inflight++
	p.mu.Unlock()
	_, err := w.Write(b)
	p.mu.Lock()
	p.inflight--
	p.cond.Broadcast()
	p.mu.Unlock()
	return err == nil
}

func (p *Proxy) forget(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// takeRule returns the armed rule if it matches args, disarming it.
func (p *Proxy) takeRule(args []string) *dropRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rule != nil && p.rule.match(args) {
		r := p.rule
		p.rule = nil
		return r
	}
	return nil
}

// up copies client to server, command by command.
func (p *Proxy) up(c *proxyConn) {
	defer p.wg.Done()
	defer p.forget(c)
	buf := make([]byte, 64<<10)
	var pending []byte
	raw := false // the stream could not be parsed: forward bytes as they are
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			if raw {
				if !p.write(c.server, pending) {
					c.close()
					return
				}
				pending = pending[:0]
			} else {
				off := 0
				var rule *dropRule
				var ruleArgs []string
				for off < len(pending) {
					args, m, perr := parseCommand(pending[off:])
					if errors.Is(perr, errIncomplete) {
						break
					}
					if perr != nil {
						raw = true
						off = len(pending)
						break
					}
					if sr := p.stallBefore(args); sr != nil {
						if off > 0 && !p.write(c.server, pending[:off]) {
							c.close()
							return
						}
						pending = append(pending[:0], pending[off:]...)
						off = 0
						p.Stall()
						sr.fired <- args
					}
					off += m
					if rule = p.takeRule(args); rule != nil {
						ruleArgs = args
						break
					}
				}
				if rule != nil {
					p.dropAndCut(c, pending[:off], rule, ruleArgs)
					return
				}
				if off > 0 {
					if !p.write(c.server, pending[:off]) {
						c.close()
						return
					}
					pending = append(pending[:0], pending[off:]...)
				}
			}
		}
		if err != nil {
			c.close()
			return
		}
	}
}

// dropAndCut forwards out (ending with the matched command), stops
// forwarding replies, half-closes the server side, waits for the server to
// close its side, then closes the client side and reports.
func (p *Proxy) dropAndCut(c *proxyConn, out []byte, rule *dropRule, args []string) {
	c.dropOnce.Do(func() { close(c.dropping) })
	ev := DropEvent{Args: args}
	if _, err := c.server.Write(out); err != nil {
		ev.Err = fmt.Errorf("redistest: proxy: forwarding %s: %w", args[0], err)
	} else if tc, ok := c.server.(*net.TCPConn); ok {
		if err := tc.CloseWrite(); err != nil {
			ev.Err = fmt.Errorf("redistest: proxy: half-closing: %w", err)
		}
	}
	select {
	case <-c.downDone:
	case <-time.After(10 * time.Second):
		if ev.Err == nil {
			ev.Err = errors.New("redistest: proxy: the server did not close the connection within 10s")
		}
	}
	c.close()
	<-c.downDone
	ev.Discarded = c.discarded.Bytes()
	rule.fired <- ev
}

// down copies server to client; once the connection is dropping, it keeps
// the bytes instead.
func (p *Proxy) down(c *proxyConn) {
	defer p.wg.Done()
	defer close(c.downDone)
	buf := make([]byte, 64<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			if c.isDropping() {
				c.discarded.Write(buf[:n])
			} else if !p.write(c.client, buf[:n]) {
				if !c.isDropping() {
					c.close()
				}
				return
			}
		}
		if err != nil {
			if !c.isDropping() {
				c.close()
			}
			return
		}
	}
}

var errIncomplete = errors.New("incomplete command")

// parseCommand parses one RESP command (an array of bulk strings) at the
// start of b and returns its arguments and length in bytes. It returns
// errIncomplete when b holds only part of it.
func parseCommand(b []byte) ([]string, int, error) {
	n, off, err := parseHeader(b, 0, '*')
	if err != nil {
		return nil, 0, err
	}
	args := make([]string, 0, n)
	for range n {
		l, next, err := parseHeader(b, off, '$')
		if err != nil {
			return nil, 0, err
		}
		if len(b) < next+l+2 {
			return nil, 0, errIncomplete
		}
		if b[next+l] != '\r' || b[next+l+1] != '\n' {
			return nil, 0, fmt.Errorf("bulk string not followed by CRLF")
		}
		args = append(args, string(b[next:next+l]))
		off = next + l + 2
	}
	return args, off, nil
}

// parseHeader parses "<kind><n>\r\n" at b[off:] and returns n and the
// offset after it.
func parseHeader(b []byte, off int, kind byte) (int, int, error) {
	if len(b) <= off {
		return 0, 0, errIncomplete
	}
	if b[off] != kind {
		return 0, 0, fmt.Errorf("expected %q, got %q", kind, b[off])
	}
	i := bytes.Index(b[off:], []byte("\r\n"))
	if i < 0 {
		if len(b)-off > 32 {
			return 0, 0, fmt.Errorf("header too long")
		}
		return 0, 0, errIncomplete
	}
	n, err := strconv.Atoi(string(b[off+1 : off+i]))
	if err != nil || n < 0 {
		return 0, 0, fmt.Errorf("bad header %q", b[off:off+i])
	}
	return n, off + i + 2, nil
}
