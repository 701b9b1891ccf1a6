package rlock

import (
	"math"
	"testing"
	"time"
)

// TestExpBackOffNeverOverflows: the exponential back-off grows to its max
// and stays there, even with a max and multiplier as large as their types
// allow (next*mul used to overflow into short or negative sleeps).
func TestExpBackOffNeverOverflows(t *testing.T) {
	for _, c := range []struct {
		max time.Duration
		mul int
	}{{math.MaxInt64, math.MaxInt}, {math.MaxInt64, 3}, {time.Hour, math.MaxInt}, {128 * time.Millisecond, 2}} {
		b := &expBackOff{next: time.Millisecond, max: c.max, mul: c.mul}
		prev := time.Duration(0)
		for i := range 200 {
			d := b.Next()
			if d < prev || d <= 0 || d > c.max {
				t.Fatalf("max %v, multiplier %d: sleep %d is %v after %v", c.max, c.mul, i, d, prev)
			}
			prev = d
		}
		if prev != c.max {
			t.Errorf("max %v, multiplier %d: the sleeps end at %v, not at the max", c.max, c.mul, prev)
		}
	}
}
