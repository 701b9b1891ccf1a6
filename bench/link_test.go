package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/bench"
)

// TestLink checks that the link adds its delay in each direction, keeps a
// pipeline's order, and delays a pipeline once, not once per command.
func TestLink(t *testing.T) {
	direct, err := bench.RoundTrip(addr, 20)
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that the timers' lateness (about a millisecond) is small
	// beside it.
	const oneWay = 20 * time.Millisecond
	l, err := bench.StartLink(addr, oneWay)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rt, err := bench.RoundTrip(l.Addr(), 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PING p50: %v direct, %v through a link of %v each way", direct, rt, oneWay)
	if rt < 2*oneWay {
		t.Fatalf("PING p50 through the link %v, want at least %v", rt, 2*oneWay)
	}

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{l.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := context.Background()
	key := "link-test:" + t.Name()
	if err := rc.Do(ctx, rc.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	cmds := make(rueidis.Commands, 500)
	for i := range cmds {
		cmds[i] = rc.B().Incr().Key(key).Build()
	}
	start := time.Now()
	for i, r := range rc.DoMulti(ctx, cmds...) {
		if v, err := r.AsInt64(); err != nil || v != int64(i+1) {
			t.Fatalf("reply %d: %d, %v; want %d", i, v, err, i+1)
		}
	}
	// One pipeline: about one round trip, not one per command (or per
	// chunk: a second delay added would take it past 3 round trips).
	if el := time.Since(start); el > 6*oneWay {
		t.Fatalf("500 pipelined INCRs took %v through the link", el)
	}
	rc.Do(ctx, rc.B().Del().Key(key).Build())
}
