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
	cond    *sync.Cond // signalled when ran grows
	posted  uint64     // functions posted so far
	ran     uint64     // functions run so far
	queue   []func()
	running bool
	gid     int64         // the running goroutine's id
	idle    chan struct{} // closed when no goroutine runs
}

func (n *notifier) init() {
	n.idle = make(chan struct{})
	close(n.idle)
	n.cond = sync.NewCond(&n.mu)
}

// post queues fn and returns its place: waitRan(place) returns once fn
// has run.
func (n *notifier) post(fn func()) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.queue = append(n.queue, fn)
	n.posted++
	if !n.running {
		n.running = true
		n.idle = make(chan struct{})
		go n.run()
	}
	return n.posted
}

// waitRan waits until the function posted at place has run.
func (n *notifier) waitRan(place uint64) {
	n.mu.Lock()
	for n.ran < place {
		n.cond.Wait()
	}
	n.mu.Unlock()
}

func (n *notifier) run() {
	n.mu.Lock()
	n.gid = owner.Goroutine()
	for len(n.queue) > 0 {
		fn := n.queue[0]
		n.queue[0] = nil
		n.queue = n.queue[1:]
		n.mu.Unlock()
		fn()
		n.mu.Lock()
		n.ran++
		n.cond.Broadcast()
	}
	n.running = false
	n.gid = 0
	close(n.idle)
	n.mu.Unlock()
}

// current reports whether the caller runs on the notifier's goroutine.
func (n *notifier) current() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running && n.gid == owner.Goroutine()
}

// drained waits until everything posted so far has run (the caller must
// not be the notifier's goroutine).
func (n *notifier) drained() {
	n.mu.Lock()
	place := n.posted
	n.mu.Unlock()
	n.waitRan(place)
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
