package rlocktest_test

import (
	"context"
	"testing"

	"github.com/goredisson/locks/rlock"
	"github.com/goredisson/locks/rlocktest"
)

// exportOnce is code under test: it runs the export unless another
// instance holds the lock.
func exportOnce(ctx context.Context, locks *rlock.Client, run func()) (bool, error) {
	l := locks.Lock("export")
	ok, err := l.TryLock(ctx, 0, 0)
	if err != nil || !ok {
		return false, err
	}
	defer l.Unlock(ctx)
	run()
	return true, nil
}

func TestExportOnce(t *testing.T) {
	locks := rlocktest.New(t)
	ok, err := exportOnce(context.Background(), locks, func() {})
	if err != nil || !ok {
		t.Fatalf("exportOnce = %v, %v", ok, err)
	}
}

// A unit test of code that takes locks, without a Redis server.
func Example() {
	t := &testing.T{} // in a real test, the *testing.T of the test
	locks := rlocktest.New(t)
	_, _ = exportOnce(context.Background(), locks, func() {})
}
