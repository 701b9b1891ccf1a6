-- acquire: take or re-enter a Redisson RLock (contract 1.2), fenced.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  lease in milliseconds (the caller's lease, or the watchdog timeout)
-- ARGV[2]  owner field "<clientId>:<ownerId>"
--
-- Replies (this library's own encoding; Java never reads them):
--   n > 0   acquired or re-entered: ARGV[2]'s count is now n, the TTL ARGV[1]
--   0       fenced: the fence key exists (see fence.lua), nothing was done
--   r < 0   held by another owner; its PTTL is -2 - r (-1: no expiry)
--
-- The data it writes is exactly Redisson's (HINCRBY, PEXPIRE). Not
-- idempotent: it is never resent while an earlier call may still run; a
-- lost reply is settled with fence.lua.
if redis.call('exists', KEYS[2]) == 1 then
    return 0
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return n
end
return -2 - redis.call('pttl', KEYS[1])
