-- unlock: release one level of a Redisson RLock hold (contract 1.3, 3.24.0+).
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  channel "redisson_lock__channel:{<raw>}"
-- KEYS[3]  latch "redisson_unlock_latch:{<raw>}:<32 hex request id>"
-- ARGV[1]  unlock message, always "0"
-- ARGV[2]  lease in milliseconds restored after a partial unlock
-- ARGV[3]  owner field "<clientId>:<ownerId>"
-- ARGV[4]  publish command: "PUBLISH" or "SPUBLISH"
-- ARGV[5]  latch TTL in milliseconds
--
-- Returns nil when ARGV[3] does not hold the lock; 0 when it still holds it
-- (re-entrant count above zero, TTL reset to ARGV[2]); 1 when the lock was
-- deleted and ARGV[1] published on KEYS[2]. A retry with the same latch key
-- returns the first call's result instead of running again.
local latch = redis.call('get', KEYS[3])
if latch ~= false then
    return tonumber(latch)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
