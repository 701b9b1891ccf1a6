package rlock

// NonReentrantLock is Redisson 4.4+'s non-reentrant lock
// (getNonReentrantLock, PROTOCOL.md 8): the RLock's data, but an owner that
// holds it cannot take it again: Lock, LockLease and TryLock fail with an
// error wrapping ErrAlreadyHeld (Java throws IllegalMonitorStateException
// for its NON_REENTRANT_REACQUIRE reply), and the count stays 1, so one
// Unlock frees it. A plain Lock on the same name and owner shares the hold:
// it re-enters, and the non-reentrant lock's attempt then fails.
//
// Not fair, as Lock: an unlock wakes one waiter, which may lose to an
// owner that arrives meanwhile (TestRedissonFamily/*/NonReentrant,
// TestFaultMatrix/nonreentrant).
type NonReentrantLock struct{ base }

// NonReentrantLock returns the non-reentrant lock called name. It is cheap
// and does no I/O.
func (c *Client) NonReentrantLock(name string) *NonReentrantLock {
	l := &NonReentrantLock{c.newBase(name, KindNonReentrant)}
	if l.err == nil {
		l.spec = c.lockSpec(name, lockVariant{nonReentrant: true})
	}
	return l
}
