package redistest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Fault is what a Faulty client does to a matching call.
type Fault int

const (
	// Drop: the request never reaches Redis; the caller gets a
	// connection error (it cannot tell the call did not run).
	Drop Fault = iota + 1
	// LoseReply: the call runs on Redis; its reply is lost and the caller
	// gets a connection error.
	LoseReply
	// Late: the caller gets a timeout at once; the request reaches Redis
	// Delay later (a request held up on another connection).
	Late
	// Refuse: Redis refuses the call with Err (BUSY, TRYAGAIN, ...); it
	// does not run.
	Refuse
)

func (f Fault) String() string {
	switch f {
	case Drop:
		return "request dropped"
	case LoseReply:
		return "reply lost"
	case Late:
		return "request late"
	case Refuse:
		return "refused"
	}
	return "fault?"
}

// ErrInjected is the connection error a Faulty client returns for Drop and
// LoseReply.
var ErrInjected = errors.New("redistest: injected connection failure")

// Rule picks calls and says what to do to them.
type Rule struct {
	Match func(args []string) bool // on each command's words
	Fault Fault
	Err   error         // Refuse: the Redis error to return (see RedisError)
	Delay time.Duration // Late: how long the request is held up
	Times int           // how many calls it hits (0: one)

	hits int
}

// Faulty wraps a rueidis client and injects faults into the calls that
// match its rules: Do and DoMulti (a DoMulti is hit as a whole when any
// of its commands matches). Everything else goes through untouched.
type Faulty struct {
	rueidis.Client

	mu    sync.Mutex
	rules []*Rule
	late  sync.WaitGroup
	ran   chan []string // commands sent late, once they have run
}

// NewFaulty wraps c.
func NewFaulty(c rueidis.Client) *Faulty { return &Faulty{Client: c, ran: make(chan []string, 64)} }

// Inject adds a rule.
func (f *Faulty) Inject(r Rule) {
	if r.Times == 0 {
		r.Times = 1
	}
	f.mu.Lock()
	f.rules = append(f.rules, &r)
	f.mu.Unlock()
}

// Clear removes every rule.
func (f *Faulty) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
}

// Pending reports how many rule hits are left.
func (f *Faulty) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.rules {
		n += r.Times - r.hits
	}
	return n
}

// LateRan returns a channel that receives the first command of each late
// call once it has run on Redis.
func (f *Faulty) LateRan() <-chan []string { return f.ran }

// WaitLate waits for every late call to have been sent.
func (f *Faulty) WaitLate() { f.late.Wait() }

func (f *Faulty) match(cmds ...rueidis.Completed) *Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.hits >= r.Times {
			continue
		}
		for _, c := range cmds {
			if r.Match(c.Commands()) {
				r.hits++
				return r
			}
		}
	}
	return nil
}

// Do runs cmd, unless a rule says otherwise.
func (f *Faulty) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return f.DoMulti(ctx, cmd)[0]
}

// DoMulti runs cmds, unless a rule says otherwise.
func (f *Faulty) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	r := f.match(cmds...)
	if r == nil {
		return f.Client.DoMulti(ctx, cmds...)
	}
	fail := func(err error) []rueidis.RedisResult {
		out := make([]rueidis.RedisResult, len(cmds))
		for i := range out {
			out[i] = rueidis.NewErrorResult(err)
		}
		return out
	}
	switch r.Fault {
	case Drop:
		return fail(ErrInjected)
	case LoseReply:
		f.Client.DoMulti(context.WithoutCancel(ctx), cmds...)
		return fail(ErrInjected)
	case Late:
		f.late.Add(1)
		words := cmds[0].Commands()
		go func() {
			defer f.late.Done()
			time.Sleep(r.Delay)
			f.Client.DoMulti(context.Background(), cmds...)
			select {
			case f.ran <- words:
			default:
			}
		}()
		return fail(context.DeadlineExceeded)
	case Refuse:
		return fail(r.Err)
	}
	return f.Client.DoMulti(ctx, cmds...)
}

// RedisError returns a real Redis error reply with the text msg (for
// example "BUSY Redis is busy running a script"), obtained from the server
// behind c, for Rule.Err.
func RedisError(ctx context.Context, c rueidis.Client, msg string) error {
	err := c.Do(ctx, c.B().Eval().Script("return redis.error_reply(ARGV[1])").Numkeys(0).Arg(msg).Build()).Error()
	if _, ok := rueidis.IsRedisErr(err); !ok {
		return errors.New("redistest: no Redis error reply for " + msg)
	}
	return err
}
