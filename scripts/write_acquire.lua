-- write_acquire: take or re-enter the write lock of a Redisson
-- RReadWriteLock (PROTOCOL.md 5.5), fenced and checked against the count the
-- caller expects.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  lease in milliseconds (the caller's lease, or the watchdog timeout)
-- ARGV[2]  writer field "<clientId>:<ownerId>:write"
-- ARGV[3]  the count of ARGV[2] the caller expects to find (its record)
-- ARGV[4]  fence TTL in milliseconds
--
-- Replies: as acquire.lua's (n > 0, 0, r < 0, {c}).
--
-- The data is exactly Redisson's: mode "write" and the writer's count; a
-- re-entry adds the lease to the TTL left. Any read hold, even the same
-- owner's, blocks (no upgrade).
local fence = KEYS[2]
if redis.call('exists', fence) == 1 then
    return 0
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if prior ~= tonumber(ARGV[3]) then
    redis.call('set', fence, 's', 'px', ARGV[4])
    return {prior}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    -- The HSET checked first (acl_prelude.lua): a hash without a mode (a
    -- plain lock of the same name) exists, and its TTL is a write. PEXPIRE
    -- on a missing key does nothing and is its own check.
    acl_may('hset', KEYS[1], 'mode', 'write')
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
if mode == 'write' and prior > 0 then
    -- The count checked before the TTL, the first write (acl_prelude.lua).
    acl_may('hincrby', KEYS[1], ARGV[2], '1')
    local ttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], ttl + tonumber(ARGV[1]))
    return redis.call('hincrby', KEYS[1], ARGV[2], 1)
end
return -2 - redis.call('pttl', KEYS[1])
