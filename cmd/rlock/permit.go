package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/goredisson/locks/rlock"
)

// lockable is what 'rlock run' holds while its command runs: a lock of any
// kind, or one permit of a semaphore (permitHold).
type lockable interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Lock(ctx context.Context) error
	LockLease(ctx context.Context, lease time.Duration) error
	Unlock(ctx context.Context) error
	HoldContext(ctx context.Context) (context.Context, error)
}

// permitHold holds one permit of a Redisson permit-expirable semaphore as
// a lockable. Its lease is the fixed --lease, or the watchdog timeout
// renewed (UpdateLeaseTime) every third of it, as the lock watchdog does:
// a killed rlock's permit comes back within the watchdog timeout. The hold
// context ends with ErrLockLost when a renewal finds the permit gone (or
// renewals failed until the lease could have run out), with
// ErrLeaseExpired at the end of a fixed lease, and with ErrUnlocked at
// Unlock.
type permitHold struct {
	s        *rlock.PermitExpirableSemaphore
	name     string
	watchdog time.Duration

	mu     sync.Mutex
	id     string
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Unlock: no renewal after it
	done   chan struct{} // closed when the renewer has returned
}

func (p *permitHold) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	fixed := lease > 0
	if !fixed {
		lease = p.watchdog
	}
	sent := time.Now()
	id, ok, err := p.s.TryAcquire(ctx, wait, lease)
	if ok && err == nil {
		p.held(id, sent, lease, fixed)
	}
	return ok, err
}

func (p *permitHold) Lock(ctx context.Context) error {
	sent := time.Now()
	id, err := p.s.Acquire(ctx, p.watchdog)
	if err == nil {
		p.held(id, sent, p.watchdog, false)
	}
	return err
}

func (p *permitHold) LockLease(ctx context.Context, lease time.Duration) error {
	sent := time.Now()
	id, err := p.s.Acquire(ctx, lease)
	if err == nil {
		p.held(id, sent, lease, true)
	}
	return err
}

// held starts the hold of permit id, whose lease was set by a call sent
// at sent.
func (p *permitHold) held(id string, sent time.Time, lease time.Duration, fixed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.id = id
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.keep(id, p.cancel, p.stop, p.done, sent, lease, fixed)
}

// keep renews a watchdog lease, or ends a fixed one, until Unlock.
func (p *permitHold) keep(id string, cancel context.CancelCauseFunc, stop, done chan struct{}, sent time.Time, lease time.Duration, fixed bool) {
	defer close(done)
	if fixed {
		t := time.NewTimer(time.Until(sent.Add(lease)))
		defer t.Stop()
		select {
		case <-stop:
		case <-t.C:
			cancel(fmt.Errorf("%w: the permit of semaphore %q", rlock.ErrLeaseExpired, p.name))
		}
		return
	}
	// ok is the send time of the last renewal that took: the lease it set
	// runs out no earlier than ok + lease. A renewal is tried every third
	// of the lease, each bounded by a sixth; once the next one would come
	// too late, the permit is reported lost, at least a sixth of the lease
	// before another process can take it (as the lock watchdog reports
	// before the lease can run out).
	ok := sent
	period := lease / 3
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancelCtx := context.WithTimeout(context.Background(), lease/6)
		at := time.Now()
		renewed, err := p.s.UpdateLeaseTime(ctx, id, lease)
		cancelCtx()
		switch {
		case err == nil && renewed:
			ok = at
		case err == nil:
			cancel(fmt.Errorf("%w: the permit %s of semaphore %q is gone (expired or released elsewhere)", rlock.ErrLockLost, id, p.name))
			return
		case time.Since(ok)+period >= lease:
			cancel(fmt.Errorf("%w: the permit %s of semaphore %q could not be renewed before its lease could run out: %v", rlock.ErrLockLost, id, p.name, err))
			return
		}
	}
}

// Unlock stops the renewal, then releases the permit: rlock.ErrNotHeld if
// it was gone.
func (p *permitHold) Unlock(ctx context.Context) error {
	p.mu.Lock()
	id, stop, done, cancel := p.id, p.stop, p.done, p.cancel
	p.stop = nil
	p.mu.Unlock()
	if stop == nil {
		return rlock.ErrNotHeld
	}
	close(stop)
	<-done
	ok, err := p.s.TryRelease(ctx, id)
	cancel(rlock.ErrUnlocked)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: the permit %s of semaphore %q", rlock.ErrNotHeld, id, p.name)
	}
	return nil
}

func (p *permitHold) HoldContext(context.Context) (context.Context, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		return nil, errors.New("no permit held")
	}
	if p.ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", rlock.ErrNotHeld, context.Cause(p.ctx))
	}
	return p.ctx, nil
}

// permitID is the held permit's id ("" before one is held).
func (p *permitHold) permitID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}
