//go:build unix

package main

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/locks/internal/redistest"
	"github.com/goredisson/locks/rlock"
)

// TestWatch: watch prints the initial state, then a line when another
// process locks and when it unlocks, with keyspace notifications (server
// configured for them, or configured by --enable-notifications) and by
// polling (server without them). With notifications the lines come well
// before the 10s safety re-read, so they are event-driven.
func TestWatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		cfg      redistest.Config
		flags    []string
		mode     string
		within   time.Duration
		reason   bool // "free (deleted)" after the unlock
		checkCfg bool
	}{
		{"notifications", redistest.Config{Args: []string{"--notify-keyspace-events", "KEA"}}, nil,
			"watching via keyspace notifications (__keyspace@0__:", 3 * time.Second, true, false},
		{"polling", redistest.Config{}, []string{"--interval", "100ms"},
			`watching by polling every 100ms: notify-keyspace-events is "" and lacks "Kg$lhzxe"`, 5 * time.Second, false, false},
		{"enable notifications", redistest.Config{}, []string{"--enable-notifications"},
			"watching via keyspace notifications", 3 * time.Second, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StandaloneWith(t, tc.cfg)
			name := lockName(t, "x")
			w := startRlock(t, redisEnv(srv), append(append([]string{"watch"}, tc.flags...), name)...)
			w.waitStderr(tc.mode, 10*time.Second)
			w.waitStdout(name+" free\n", 10*time.Second)
			if tc.checkCfg {
				assert.Empty(t, missingClasses(configGet(t, srv, "notify-keyspace-events")), "--enable-notifications set it")
			}

			svc := libClient(t, srv)
			l := svc.Lock(name)
			ctx := rlock.WithOwner(context.Background(), 9)
			require.NoError(t, l.Lock(ctx))
			w.waitStdout(name+" held by "+svc.ID()+":9 count 1 ttl ", tc.within)
			require.NoError(t, l.Lock(ctx))
			w.waitStdout(name+" held by "+svc.ID()+":9 count 2 ttl ", tc.within)
			require.NoError(t, l.Unlock(ctx))
			w.waitOutput(w.stdout, "a second count 1 line", tc.within, func(s string) bool {
				return strings.Count(s, name+" held by "+svc.ID()+":9 count 1 ttl ") == 2
			})
			require.NoError(t, l.Unlock(ctx))
			want := name + " free\n"
			if tc.reason {
				want = name + " free (deleted)\n"
			}
			w.waitOutput(w.stdout, "a second free line", tc.within, func(s string) bool {
				return strings.Count(s, name+" free") == 2 && strings.HasSuffix(s, want)
			})

			w.signal(syscall.SIGINT)
			assert.Equal(t, 0, w.wait(10*time.Second), "stderr: %s", w.stderr)
			lines := strings.Split(strings.TrimSpace(w.stdout.String()), "\n")
			assert.Len(t, lines, 5, "one line per change, none for TTL renewals:\n%s", w.stdout)
			ts := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) `)
			for _, line := range lines {
				assert.Regexp(t, ts, line)
			}
		})
	}
}

// TestWatchExpiry: with notifications, a lock that expires is reported as
// such.
func TestWatchExpiry(t *testing.T) {
	t.Parallel()
	srv := redistest.StandaloneWith(t, redistest.Config{Args: []string{"--notify-keyspace-events", "KEA"}})
	name := lockName(t, "x")
	w := startRlock(t, redisEnv(srv), "watch", name)
	w.waitStdout(name+" free\n", 10*time.Second)
	do(t, srv, "HSET", name, "0b6c7d2e-9f3a-4e1b-8c5d-1a2b3c4d5e6f:57", "1")
	w.waitStdout(name+" held by 0b6c7d2e-9f3a-4e1b-8c5d-1a2b3c4d5e6f:57 count 1 no ttl\n", 3*time.Second)
	do(t, srv, "PEXPIRE", name, "200")
	w.waitStdout(name+" free (expired)\n", 5*time.Second)
	w.signal(syscall.SIGTERM)
	assert.Equal(t, 0, w.wait(10*time.Second))
}

func configGet(t *testing.T, srv *redistest.Server, param string) string {
	t.Helper()
	msg, err := srv.Do(context.Background(), "CONFIG", "GET", param)
	require.NoError(t, err)
	m, err := msg.AsStrMap()
	require.NoError(t, err)
	return m[param]
}
