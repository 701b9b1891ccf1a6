-- write_unlock: release one level of the write hold of a Redisson
-- RReadWriteLock (PROTOCOL.md 5.6), fenced and checked against the count the
-- caller expects.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  channel "redisson_rwlock:{<raw>}"
-- KEYS[3]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  message, always "1" (wakes every waiter)
-- ARGV[2]  lease in milliseconds restored after a partial unlock
-- ARGV[3]  writer field "<clientId>:<ownerId>:write"
-- ARGV[4]  publish command: "PUBLISH" or "SPUBLISH"
-- ARGV[5]  the count of ARGV[3] the caller expects to find (its record)
-- ARGV[6]  fence TTL in milliseconds
--
-- Replies: as unlock.lua's (n > 0 partial, 0 released, -1 not held, -2
-- fenced, {c} refused). With -1, ARGV[1] is published when the lock does
-- not exist (no mode), as Redisson's unlock does. A partial unlock sets
-- the TTL to ARGV[2], as Redisson, but never below the TTL left when the
-- owner also holds read locks (which only it can while it writes). At 0
-- the lock is deleted and ARGV[1] published, unless the same owner still
-- holds read locks: then the mode becomes "read" and nothing is published
-- (a downgrade).
local fence = KEYS[3]
if redis.call('exists', fence) == 1 then
    return -2
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or 0)
if prior ~= tonumber(ARGV[5]) then
    redis.call('set', fence, 's', 'px', ARGV[6])
    return {prior}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
    -- As Redisson's: an unlock that finds no lock at all (the hash expired
    -- or was deleted) still publishes ARGV[1], a hint to the waiters.
    redis.call(ARGV[4], KEYS[2], ARGV[1])
end
if prior == 0 or mode ~= 'write' then
    return -1
end
-- Every call after the first write (the HINCRBY), checked before it
-- (acl_prelude.lua): a refused unlock leaves the hold as it was.
acl_may('pexpire', KEYS[1], ARGV[2])
acl_may('hdel', KEYS[1], ARGV[3])
acl_may('del', KEYS[1])
acl_may('hset', KEYS[1], 'mode', 'read')
acl_may(ARGV[4], KEYS[2], ARGV[1])
-- and the reads that follow a write
acl_may('hlen', KEYS[1])
acl_may('pttl', KEYS[1])
local n = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if n > 0 then
    -- Redisson sets the lease; when the same owner also reads (HLEN > 2),
    -- the TTL is never cut below what its read holds have left.
    local ttl = tonumber(ARGV[2])
    if redis.call('hlen', KEYS[1]) > 2 then
        ttl = math.max(ttl, redis.call('pttl', KEYS[1]))
    end
    redis.call('pexpire', KEYS[1], ttl)
    return n
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
return 0
