package hold

import (
	"sync"

	"github.com/goredisson/locks/internal/owner"
)

// notifier runs posted functions in order on one goroutine, started when
// there is work and ended when the queue is empty, so an idle Client has
// no goroutine for it.
type notifier struct {
	mu      sync.Mutex
	urgent  []func() // run before queue: ending HoldContexts
	queue   []func()
	running bool
	gid     int64         // the running goroutine's id
	idle    chan struct{} // closed when no goroutine runs
}

func (n *notifier) init() {
	n.idle = make(chan struct{})
	close(n.idle)
}

func (n *notifier) post(fn func()) { n.add(&n.queue, fn) }

// postUrgent posts fn ahead of everything posted with post that has not
// started: a slow end handler must not delay the HoldContexts of other
// holds (which are what tells their holders to stop).
func (n *notifier) postUrgent(fn func()) { n.add(&n.urgent, fn) }

func (n *notifier) add(q *[]func(), fn func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	*q = append(*q, fn)
	if !n.running {
		n.running = true
		n.idle = make(chan struct{})
		go n.run()
	}
}

func (n *notifier) run() {
	n.mu.Lock()
	n.gid = owner.Goroutine()
	for len(n.urgent)+len(n.queue) > 0 {
		q := &n.queue
		if len(n.urgent) > 0 {
			q = &n.urgent
		}
		fn := (*q)[0]
		(*q)[0] = nil
		*q = (*q)[1:]
		n.mu.Unlock()
		fn()
		n.mu.Lock()
	}
	n.running = false
	n.gid = 0
	close(n.idle)
	n.mu.Unlock()
}

// close waits until everything posted so far has run, unless it is called
// from the notifier's own goroutine (a handler calling Close), which then
// finishes the queue after the handler returns.
func (n *notifier) close() {
	n.mu.Lock()
	if n.running && n.gid == owner.Goroutine() {
		n.mu.Unlock()
		return
	}
	idle := n.idle
	n.mu.Unlock()
	<-idle
}
