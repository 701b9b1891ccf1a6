package rlock

import (
	"context"
	"runtime"
)

type ownerKey struct{}

// WithOwner returns a copy of ctx that makes id the owner of every lock
// operation it is passed to, instead of the calling goroutine. Use it to
// lock in one goroutine and unlock in another, or to let several goroutines
// share one hold: they act as one owner, like Redisson's async methods that
// take an explicit threadId. Any int64 works; within one Client, equal ids
// are the same owner.
func WithOwner(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// ownerOf returns the owner id for an operation: the id given to WithOwner,
// or the calling goroutine's id.
func ownerOf(ctx context.Context) int64 {
	if id, ok := ctx.Value(ownerKey{}).(int64); ok {
		return id
	}
	return goroutineID()
}

// slowGoroutineID returns the runtime's id of the calling goroutine, read
// from the header line runtime.Stack writes ("goroutine 123 [running]:").
// It costs a couple of microseconds; goroutineID uses it only where it
// cannot read the id directly (see goid_fast.go).
func slowGoroutineID() int64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = len("goroutine ")
	var id int64
	for i := prefix; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		id = id*10 + int64(b[i]-'0')
	}
	return id
}
