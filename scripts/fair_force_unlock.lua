-- fair_force_unlock: delete a Redisson RFairLock whoever holds it (PROTOCOL.md
-- 4.7). Runs after fair_prelude.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  queue "redisson_lock_queue:{<raw>}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{<raw>}"
-- KEYS[4]  channel base "redisson_lock__channel:{<raw>}"
-- KEYS[5]  this call's latch "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  message, "0"
-- ARGV[2]  publish command: "PUBLISH" or "SPUBLISH"
-- ARGV[3]  latch TTL in milliseconds
-- ARGV[4]  now, the caller's clock in ms since the epoch
--
-- Returns 1 when the lock existed and is deleted, with the head waiter
-- (after the stale cleanup) notified on its channel, 0 otherwise. The
-- queue stays, as in Redisson. The result is kept in KEYS[5]: a resend
-- with the same latch returns it without running again.
local done = redis.call('get', KEYS[5])
if done then
    return tonumber(done)
end
acl_may('del', KEYS[1])
acl_may('set', KEYS[5], '0', 'px', ARGV[3])
fair_cleanup(KEYS[2], KEYS[3], ARGV[4], KEYS[4], ARGV[2])
local r = 0
if redis.call('del', KEYS[1]) == 1 then
    fair_notify(KEYS[2], KEYS[4], ARGV[2], ARGV[1])
    r = 1
end
redis.call('set', KEYS[5], r, 'px', ARGV[3])
return r
