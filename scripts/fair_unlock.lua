-- fair_unlock: release one level of a Redisson RFairLock hold (PROTOCOL.md
-- 4.6), fenced and checked against the count the caller expects. Runs
-- after fair_prelude.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  queue "redisson_lock_queue:{<raw>}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{<raw>}"
-- KEYS[4]  channel base "redisson_lock__channel:{<raw>}" (a waiter's channel
--          is "<base>:<its field>")
-- KEYS[5]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  unlock message, always "0"
-- ARGV[2]  lease in milliseconds restored after a partial unlock
-- ARGV[3]  owner field "<clientId>:<ownerId>"
-- ARGV[4]  now, the caller's clock in ms since the epoch
-- ARGV[5]  publish command: "PUBLISH" or "SPUBLISH"
-- ARGV[6]  the count of ARGV[3] the caller expects to find (its record)
-- ARGV[7]  fence TTL in milliseconds
--
-- Replies (this library's own encoding; Java never reads them):
--   n > 0   partial unlock: ARGV[3]'s count is now n, the TTL ARGV[2]
--   0       the lock was deleted, and the head waiter (if any) notified
--   -1      ARGV[3] does not hold the lock (and the caller expected that);
--           when nobody holds it, the head waiter is notified anyway, as
--           Redisson does
--   -2      fenced: the fence key exists (see fence.lua), nothing was done
--   {c}     refused: ARGV[3]'s count is c, not ARGV[6]; nothing was done
--           but marking KEYS[5] "s", so that fence.lua can tell
--
-- The data it writes and the messages it publishes are Redisson's: only
-- the head waiter is notified, on its own channel, never the shared one.
-- No unlock latch: a lost reply is settled with fence.lua.
if redis.call('exists', KEYS[5]) == 1 then
    return -2
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or 0)
if prior ~= tonumber(ARGV[6]) then
    redis.call('set', KEYS[5], 's', 'px', ARGV[7])
    return {prior}
end
if prior > 0 then
    acl_may('hincrby', KEYS[1], ARGV[3], '-1')
    acl_may('pexpire', KEYS[1], ARGV[2])
    acl_may('del', KEYS[1])
end
fair_cleanup(KEYS[2], KEYS[3], ARGV[4], KEYS[4], ARGV[5])
if redis.call('exists', KEYS[1]) == 0 then
    fair_notify(KEYS[2], KEYS[4], ARGV[5], ARGV[1])
    return -1
end
if prior == 0 then
    return -1
end
local n = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if n > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return n
end
redis.call('del', KEYS[1])
fair_notify(KEYS[2], KEYS[4], ARGV[5], ARGV[1])
return 0
