package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/goredisson/locks/rlock"
)

// conn is a connection to Redis and the lock client on it.
type conn struct {
	rc    rueidis.Client
	locks *rlock.Client
	opt   rueidis.ClientOption
	url   string // redacted, for messages
}

func (c *conn) close() {
	if c.locks != nil {
		_ = c.locks.Close()
	}
	c.rc.Close()
}

// redisURL returns the URL to use: --redis, $REDIS_URL, or the default.
func (g *globals) redisURLToUse() string {
	switch {
	case g.redisURL != "":
		return g.redisURL
	case os.Getenv("REDIS_URL") != "":
		return os.Getenv("REDIS_URL")
	}
	return defaultRedisURL
}

// connect parses the Redis URL, connects, and makes a lock client. On
// failure it prints why and returns the exit code (64 for a bad URL, 69
// when Redis cannot be reached).
func (g *globals) connect(cmd string, opts ...rlock.Option) (*conn, int) {
	raw := g.redisURLToUse()
	red := redactURL(raw)
	opt, err := rueidis.ParseURL(raw)
	if err != nil {
		return nil, g.usageError(cmd, "bad Redis URL %s: %v", red, urlError(err))
	}
	// rlock uses no client-side caching; without it rueidis also works with
	// servers that lack RESP3 or CLIENT TRACKING.
	opt.DisableCache = true
	if opt.ClientName == "" {
		opt.ClientName = "rlock"
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		g.errorf("cannot connect to Redis at %s: %v", red, err)
		return nil, exitUnavailable
	}
	if sentinelAsServer(rc) {
		rc.Close()
		return nil, g.usageError(cmd, "%s is a Redis Sentinel, not a Redis server: name the master it watches with ?master_set=NAME (the Sentinels are then the host and its ?addr= seeds)", red)
	}
	c := &conn{rc: rc, opt: opt, url: red}
	c.locks, err = rlock.New(rc, append([]rlock.Option{rlock.WithWatchdogTimeout(g.watchdog.d)}, opts...)...)
	if err != nil {
		rc.Close()
		g.errorf("%v", err)
		return nil, errorCode(err)
	}
	return c, exitOK
}

// sentinelAsServer reports whether a plain connection reached a Sentinel
// (which answers EVALSHA with "unknown command"): INFO server says
// redis_mode:sentinel. A server that refuses INFO (an ACL) is taken as a
// server.
func sentinelAsServer(rc rueidis.Client) bool {
	if rc.Mode() != rueidis.ClientModeStandalone {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rc.Do(ctx, rc.B().Info().Section("server").Build()).ToString()
	return err == nil && strings.Contains(info, "redis_mode:sentinel")
}

// errorCode maps an error from a Redis operation to an exit code: 70 for a
// Redis error reply, 64 for an argument the library rejects, 69 otherwise
// (network, timeout).
func errorCode(err error) int {
	var re *rueidis.RedisError
	switch {
	case errors.As(err, &re) && !rueidis.IsRedisNil(re):
		return exitSoftware
	case errors.Is(err, rlock.ErrInvalidName), errors.Is(err, rlock.ErrInvalidArgument):
		return exitUsage
	}
	return exitUnavailable
}

// redactURL returns s with any password replaced by "xxxxx". It also
// handles URLs that net/url cannot parse, so no message ever carries a
// password.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	i := strings.Index(s, "://")
	if i < 0 {
		if at := strings.LastIndex(s, "@"); at >= 0 {
			return "xxxxx" + s[at:]
		}
		return s
	}
	rest := s[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	user := rest[:at]
	if j := strings.IndexByte(user, ':'); j >= 0 {
		return s[:i+3] + user[:j] + ":xxxxx" + rest[at:]
	}
	return s[:i+3] + "xxxxx" + rest[at:]
}

// urlError strips the URL (which may hold a password) from a *url.Error.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// opCtx bounds one round of inspection calls.
func opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, 10*time.Second)
}
