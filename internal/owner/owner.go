// Package owner says who owns a lock operation: the id given with With on
// the context, or the calling goroutine. Goroutine ids are never reused
// within a process (the runtime counts them up), so a goroutine owner is
// unique for the life of the process.
package owner

import (
	"context"
	"runtime"
	"strconv"
	"strings"
)

type key struct{}

// With returns a copy of ctx whose operations are owned by id.
func With(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// Of returns the owner of an operation under ctx, and whether it was set
// explicitly with With (shared owners) rather than taken from the calling
// goroutine.
func Of(ctx context.Context) (id int64, explicit bool) {
	if id, ok := ctx.Value(key{}).(int64); ok {
		return id, true
	}
	return Goroutine(), false
}

// Goroutine returns the calling goroutine's id.
func Goroutine() int64 { return goroutineID() }

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

// ParseField splits a Redisson hash field "<clientId>:<ownerId>", or a
// write lock's "<clientId>:<ownerId>:write"; ok is false for a field of
// another shape.
func ParseField(field string) (clientID string, ownerID int64, ok bool) {
	f := strings.TrimSuffix(field, ":write")
	i := strings.LastIndexByte(f, ':')
	if i <= 0 {
		return "", 0, false
	}
	id, err := strconv.ParseInt(f[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return f[:i], id, true
}
