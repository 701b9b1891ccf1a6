package bench

import (
	"context"
	"errors"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Link is a TCP proxy in front of one Redis that delays every byte by a
// fixed time in each direction, keeping the order: a link between hosts on
// a machine whose servers all listen on loopback. It is for the scenarios
// whose point is round trips (the RedLock's members reached at once), where
// loopback's round trip is so short that CPU, not the network, is measured.
//
// Go's timers wake up to about a millisecond late on Linux, so the delay
// actually added is longer than asked for (and a sub-millisecond delay
// cannot be had); RoundTrip measures it. A half-closed connection is
// closed whole: Redis clients do not half-close.
type Link struct {
	ln     net.Listener
	up     string
	oneWay time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartLink listens on a free loopback port and forwards each connection
// to upstream with oneWay added in each direction.
func StartLink(upstream string, oneWay time.Duration) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, up: upstream, oneWay: oneWay, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// Addr is the address clients dial instead of upstream's.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Close stops listening and closes every connection it forwards.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	_ = l.ln.Close()
	l.wg.Wait()
}

func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Link) forget(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *Link) serve() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if !l.track(c) {
				return
			}
			defer l.forget(c)
			u, err := net.DialTimeout("tcp", l.up, 5*time.Second)
			if err != nil {
				_ = c.Close()
				return
			}
			if !l.track(u) {
				_ = c.Close()
				return
			}
			defer l.forget(u)
			done := make(chan struct{})
			go func() {
				defer close(done)
				l.forward(u, c)
			}()
			l.forward(c, u)
			<-done
		}()
	}
}

// forward copies src to dst, each chunk written oneWay after it was read,
// in order; when either side ends, both are closed.
func (l *Link) forward(dst, src net.Conn) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 4096)
	go func() {
		defer close(ch)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now().Add(l.oneWay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		if d := time.Until(c.at); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	for range ch { // the reader ends on the closed src
	}
}

// RoundTrip measures n PINGs through addr, one at a time, and returns
// their median.
func RoundTrip(addr string, n int) (time.Duration, error) {
	if n < 1 {
		return 0, errors.New("RoundTrip: n < 1")
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	ctx := context.Background()
	d := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
			return 0, err
		}
		d = append(d, time.Since(t))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], nil
}
