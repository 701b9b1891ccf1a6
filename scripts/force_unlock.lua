-- force_unlock: delete a Redisson RLock whoever holds it (contract 1.5).
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  channel "redisson_lock__channel:{<raw>}"
-- KEYS[3]  this call's latch "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  unlock message, always "0"
-- ARGV[2]  publish command: "PUBLISH" or "SPUBLISH"
-- ARGV[3]  latch TTL in milliseconds
--
-- Returns 1 when the key existed (it is deleted and ARGV[1] published on
-- KEYS[2]), 0 otherwise. The result is kept in KEYS[3], and a call with a
-- latch that exists returns it without running again: a resend with the
-- same latch (after a lost reply) is idempotent, so it never deletes a hold
-- taken after the first call ran. Force unlocks are rare; the latch costs
-- one short-lived key each.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local r = 0
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    r = 1
end
redis.call('set', KEYS[3], r, 'px', ARGV[3])
return r
