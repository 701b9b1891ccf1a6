//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUsageErrors: bad input exits 64 with a clear message, without a
// panic and before any attempt to connect (the Redis URL points at a closed
// port, which would give 69).
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	env := []string{"REDIS_URL=redis://" + closedPort(t)}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no command", nil, "rlock: missing COMMAND"},
		{"unknown command", []string{"lock", "x"}, `rlock: unknown command "lock"`},
		{"unknown help topic", []string{"help", "lock"}, `unknown command "lock"`},
		{"unknown global flag", []string{"--nope", "status", "x"}, "flag provided but not defined: --nope"},
		{"run: no name", []string{"run"}, "rlock run: missing lock NAME"},
		{"run: no name, only command", []string{"run", "--", "true"}, "rlock run: missing lock NAME"},
		{"run: no --", []string{"run", "x", "true"}, "missing -- between NAME and COMMAND"},
		{"run: no -- nor command", []string{"run", "x"}, "missing -- between NAME and COMMAND"},
		{"run: no command", []string{"run", "x", "--"}, "missing COMMAND after --"},
		{"run: two names", []string{"run", "x", "y", "--", "true"}, `unexpected argument "y" before --`},
		{"run: bad duration", []string{"run", "--wait", "soon", "x", "--", "true"}, `invalid value "soon" for flag --wait: not a duration`},
		{"run: duration without unit", []string{"run", "--lease", "30", "x", "--", "true"}, `invalid value "30" for flag --lease`},
		{"run: negative wait", []string{"run", "--wait", "-1s", "x", "--", "true"}, "--wait -1s is negative"},
		{"run: zero lease", []string{"run", "--lease", "0", "x", "--", "true"}, "--lease 0s is below 1ms"},
		{"run: negative grace", []string{"run", "--grace", "-1s", "x", "--", "true"}, "--grace -1s is negative"},
		{"run: zero permits", []string{"run", "--semaphore", "0", "x", "--", "true"}, "--semaphore 0: the number of permits must be at least 1"},
		{"run: negative permits", []string{"run", "--semaphore", "-2", "x", "--", "true"}, "--semaphore -2: the number of permits must be at least 1"},
		{"run: two kinds", []string{"run", "--read", "--fair", "x", "--", "true"}, "--fair, --read, --write and --semaphore exclude each other"},
		{"run: read and semaphore", []string{"run", "--semaphore", "3", "--write", "x", "--", "true"}, "exclude each other"},
		{"run: flag needs value", []string{"run", "x", "--wait"}, "flag needs an argument: --wait"},
		{"run: value missing before --", []string{"run", "x", "--wait", "--", "true"}, "flag needs an argument: --wait"},
		{"run: empty name", []string{"run", "", "--", "true"}, "a lock NAME cannot be empty"},
		{"watchdog too short", []string{"--watchdog", "1ms", "run", "x", "--", "true"}, "--watchdog 1ms is too short"},
		{"watchdog not a duration", []string{"run", "--watchdog", "forever", "x", "--", "true"}, `invalid value "forever" for flag --watchdog`},
		{"status: no name", []string{"status"}, "rlock status: missing lock NAME"},
		{"status: unknown flag", []string{"status", "--yaml", "x"}, "flag provided but not defined: --yaml"},
		{"unlock: no --force", []string{"unlock", "x"}, "unlock needs --force"},
		{"unlock: no name", []string{"unlock", "--force"}, "rlock unlock: missing lock NAME"},
		{"watch: no name", []string{"watch"}, "rlock watch: missing lock NAME"},
		{"watch: zero interval", []string{"watch", "--interval", "0s", "x"}, "--interval 0s is not positive"},
		{"bad URL scheme", []string{"--redis", "http://127.0.0.1:1", "status", "x"}, "bad Redis URL http://127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runRlock(t, env, tc.args...)
			assert.Equal(t, exitUsage, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tc.msg)
			assert.Contains(t, stderr, "--help' for usage.")
			assert.Empty(t, stdout)
			assert.NotContains(t, stderr, "goroutine ")
		})
	}
}

// TestHelpAndVersion: --help (and -h, help COMMAND) print usage on stdout
// and exit 0 without touching Redis; the main and run help list the exit
// codes; --version prints the version set with -ldflags.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	env := []string{"REDIS_URL=redis://" + closedPort(t)}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:", "rlock [global flags] COMMAND", "Exit codes:", "64 ", "69 ", "75 ", "76 ", "--redis URL"}},
		{[]string{"-h"}, []string{"Commands:"}},
		{[]string{"help"}, []string{"Commands:"}},
		{[]string{"help", "run"}, []string{"Usage: rlock run"}},
		{[]string{"run", "--help"}, []string{"Usage: rlock run [flags] NAME -- COMMAND [ARGS...]", "--wait D", "--lease D", "--keep-running", "--grace D", "process group", "Exit codes:", "75 ", "76 "}},
		{[]string{"run", "x", "--help"}, []string{"Usage: rlock run"}},
		{[]string{"status", "--help"}, []string{"Usage: rlock status [--json] NAME...", "--watchdog D"}},
		{[]string{"unlock", "--help"}, []string{"Usage: rlock unlock --force NAME..."}},
		{[]string{"watch", "--help"}, []string{"Usage: rlock watch [flags] NAME...", "--enable-notifications", "--interval D"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runRlock(t, env, tc.args...)
			assert.Equal(t, 0, code, "stderr: %s", stderr)
			for _, w := range tc.want {
				assert.Contains(t, stdout, w)
			}
			assert.Empty(t, stderr)
		})
	}
	for _, args := range [][]string{{"--version"}, {"status", "--version"}} {
		code, stdout, _ := runRlock(t, env, args...)
		assert.Equal(t, 0, code)
		assert.Equal(t, "rlock "+testVersion+"\n", stdout)
	}
}

// TestUnreachableRedis: a Redis that cannot be reached gives 69, and the
// URL's password is never printed, whether it comes from --redis or
// $REDIS_URL, and even when the URL cannot be parsed.
func TestUnreachableRedis(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	const secret = "s3cr3t-pa55"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"--redis", nil, []string{"--redis", "redis://app:" + secret + "@" + addr + "/0", "status", "x"}},
		{"REDIS_URL", []string{"REDIS_URL=redis://app:" + secret + "@" + addr}, []string{"run", "x", "--", "true"}},
		{"watch", []string{"REDIS_URL=redis://:" + secret + "@" + addr}, []string{"watch", "x"}},
		{"unlock", []string{"REDIS_URL=redis://app:" + secret + "@" + addr}, []string{"unlock", "--force", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runRlock(t, tc.env, tc.args...)
			assert.Equal(t, exitUnavailable, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, "cannot connect to Redis at redis://")
			assert.Contains(t, stderr, "xxxxx@"+addr)
			assert.NotContains(t, stderr+stdout, secret)
		})
	}
	t.Run("unparsable URL", func(t *testing.T) {
		code, stdout, stderr := runRlock(t, nil, "--redis", "redis://app:"+secret+"@[::1", "status", "x")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "bad Redis URL redis://app:xxxxx@[::1")
		assert.NotContains(t, stderr+stdout, secret)
	})
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379":                   "redis://127.0.0.1:6379",
		"redis://user:pw@host:6379/2":              "redis://user:xxxxx@host:6379/2",
		"rediss://:pw@host":                        "rediss://:xxxxx@host",
		"redis://user@host":                        "redis://user@host",
		"redis://u:pw@[::1":                        "redis://u:xxxxx@[::1",
		"redis://u:p@w@[::1":                       "redis://u:xxxxx@[::1",
		"redis://pw-only@[::1":                     "redis://xxxxx@[::1",
		"unix://u:pw@/tmp/redis.sock":              "unix://u:xxxxx@/tmp/redis.sock",
		"redis://u:pw@h?addr=h2:6380&master_set=m": "redis://u:xxxxx@h?addr=h2:6380&master_set=m",
	} {
		assert.Equal(t, want, redactURL(in), in)
	}
}

func TestMissingClasses(t *testing.T) {
	for in, want := range map[string]string{
		"":         "Kg$lhzxe",
		"KEA":      "",
		"AK":       "",
		"Kg$lhzxe": "",
		"Kghxe":    "$lz",
		"Kgh":      "$lzxe",
		"Ex":       "Kg$lhze",
		"KA$lsz":   "",
		"EA":       "K",
	} {
		require.Equal(t, want, missingClasses(in), in)
	}
}
