package bench

import (
	"math/bits"
	"time"
)

// Hist is a log-linear latency histogram (64 sub-buckets per power of two,
// under 1.6% error) that records without allocating. The zero value is
// ready; it is not safe for concurrent use (merge per-goroutine ones).
type Hist struct {
	counts [2048]uint64
	n      uint64
}

func bucket(ns uint64) int {
	if ns < 64 {
		return int(ns)
	}
	e := bits.Len64(ns) - 6 // ns >> e is in [32, 64)
	return e*32 + int(ns>>uint(e))
}

func bucketValue(i int) uint64 {
	if i < 64 {
		return uint64(i)
	}
	e := i/32 - 1
	m := uint64(i - e*32)
	// midpoint of the bucket
	return (m<<uint(e) + (m+1)<<uint(e)) / 2
}

// Add records d (negative values count as 0).
func (h *Hist) Add(d time.Duration) {
	ns := uint64(0)
	if d > 0 {
		ns = uint64(d)
	}
	b := bucket(ns)
	if b >= len(h.counts) {
		b = len(h.counts) - 1
	}
	h.counts[b]++
	h.n++
}

// Merge adds o's samples to h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// Count returns the number of samples.
func (h *Hist) Count() uint64 { return h.n }

// Quantile returns the q-quantile (0 when empty).
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(bucketValue(i))
		}
	}
	return 0
}
