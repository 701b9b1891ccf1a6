-- read_acquire: take or re-enter the read lock of a Redisson RReadWriteLock
-- (PROTOCOL.md 5.2), fenced and checked against the count the caller expects.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  the owner's timeout prefix "{<raw>}:<clientId>:<ownerId>:rwlock_timeout"
--          (no braces added when the name has one)
-- KEYS[3]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  lease in milliseconds (the caller's lease, or the watchdog timeout)
-- ARGV[2]  reader field "<clientId>:<ownerId>"
-- ARGV[3]  writer field of the same owner "<clientId>:<ownerId>:write"
-- ARGV[4]  the count of ARGV[2] the caller expects to find (its record)
-- ARGV[5]  fence TTL in milliseconds
--
-- Replies (this library's own encoding, as acquire.lua's):
--   n > 0   acquired or re-entered: ARGV[2]'s count is now n; the timeout
--           key KEYS[2]:n lives ARGV[1]; the hash at least that long
--   0       fenced: the fence key exists, nothing was done
--   r < 0   write-locked by another owner; its PTTL is -2 - r
--   {c}     refused: ARGV[2]'s count is c, not ARGV[4]; the fence key is
--           marked "s"
--
-- The data is exactly Redisson's: mode "read", one count per reader, one
-- timeout key per read hold; a writer may also read (a downgrade).
local fence = KEYS[3]
if redis.call('exists', fence) == 1 then
    return 0
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if prior ~= tonumber(ARGV[4]) then
    redis.call('set', fence, 's', 'px', ARGV[5])
    return {prior}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    -- Every call after the first write is checked before it
    -- (acl_prelude.lua), so a call the ACL refuses writes nothing. (On a
    -- missing hash the first PEXPIRE does nothing and is its own check;
    -- a hash without a mode, a plain lock of the same name, may exist.)
    acl_may('set', KEYS[2] .. ':1', '1', 'px', ARGV[1])
    acl_may('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    -- The same (the PEXPIRE is the first write); the TTL is never
    -- shortened.
    local n = prior + 1
    acl_may('set', KEYS[2] .. ':' .. n, '1', 'px', ARGV[1])
    acl_may('hincrby', KEYS[1], ARGV[2], '1')
    local ttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(ttl, tonumber(ARGV[1])))
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    return n
end
return -2 - redis.call('pttl', KEYS[1])
