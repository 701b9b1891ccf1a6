package rlock

import (
	"context"

	"github.com/goredisson/locks/internal/owner"
)

// WithOwner returns a copy of ctx that makes id the owner of every lock
// operation it is passed to, instead of the calling goroutine. Use it to
// lock in one goroutine and unlock in another, or to let several goroutines
// share one hold: they act as one owner, like Redisson's async methods that
// take an explicit threadId. Any int64 works; within one Client, equal ids
// are the same owner. Operations of one owner on one lock are serialised
// within a Client (one script call at a time), which keeps their counts
// exact even when the owner's goroutines race.
func WithOwner(ctx context.Context, id int64) context.Context {
	return owner.With(ctx, id)
}

func ownerOf(ctx context.Context) int64 {
	id, _ := owner.Of(ctx)
	return id
}
