-- read_unlock: release one level of a read hold of a Redisson
-- RReadWriteLock (PROTOCOL.md 5.3), fenced and checked against the count the
-- caller expects.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  channel "redisson_rwlock:{<raw>}"
-- KEYS[3]  the owner's timeout prefix "{<raw>}:<clientId>:<ownerId>:rwlock_timeout"
-- KEYS[4]  key prefix "{<raw>}" (the raw name when it has a brace)
-- KEYS[5]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  reader field "<clientId>:<ownerId>"
-- ARGV[2]  publish command: "PUBLISH" or "SPUBLISH"
-- ARGV[3]  the count of ARGV[1] the caller expects to find (its record)
-- ARGV[4]  fence TTL in milliseconds
--
-- Replies (this library's own encoding):
--   {n, t}  ARGV[1]'s count is now n > 0, and its read holds left live
--           at most t ms more (the longest of its own timeout keys; the
--           hash may live longer, for other readers or its write hold)
--   0       ARGV[1] holds no more: its count was 1, or its holds left had
--           no time to live and the hash was deleted. The lock is deleted
--           and "0" published when no hold is left with time to live
--   -1      ARGV[1] does not hold a read lock (and the caller expected that);
--           "0" is published when the lock does not exist (no mode)
--   -2      fenced: the fence key exists, nothing was done
--   {c}     refused: ARGV[1]'s count is c, not ARGV[3]; the fence key is
--           marked "s"
--
-- The data and messages are Redisson's, except that a writer's own read
-- unlock never cuts the TTL of its write hold: the newest timeout key
-- goes first (LIFO), the hash lives as long as the longest timeout key of
-- any reader, and a write hold of the same owner keeps it.
local fence = KEYS[5]
if redis.call('exists', fence) == 1 then
    return -2
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
if prior ~= tonumber(ARGV[3]) then
    redis.call('set', fence, 's', 'px', ARGV[4])
    return {prior}
end
if prior == 0 then
    -- As Redisson's: an unlock that finds no lock at all (no mode: the
    -- hash expired or was deleted) still publishes "0", a hint to the
    -- waiters; one that finds the lock held by others publishes nothing.
    if not redis.call('hget', KEYS[1], 'mode') then
        redis.call(ARGV[2], KEYS[2], '0')
    end
    return -1
end
-- own(n): the reply for n levels left, with the longest TTL of their keys.
local function own(n)
    if n == 0 then
        return 0
    end
    local t = -2
    for i = 1, n do
        t = math.max(t, redis.call('pttl', KEYS[3] .. ':' .. i))
    end
    return {n, t}
end
-- Every call after the first write (the HINCRBY), checked before it
-- (acl_prelude.lua): a refused unlock leaves the hold as it was.
acl_may('hdel', KEYS[1], ARGV[1])
acl_may('del', KEYS[3] .. ':' .. prior)
acl_may('pexpire', KEYS[1], '1')
acl_may('del', KEYS[1])
acl_may(ARGV[2], KEYS[2], '0')
-- and the reads that follow a write
acl_may('hlen', KEYS[1])
acl_may('hkeys', KEYS[1])
acl_may('pttl', KEYS[1])
acl_may('pttl', KEYS[3] .. ':' .. prior)
local mode = redis.call('hget', KEYS[1], 'mode')
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n == 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[3] .. ':' .. (n + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    local maxRemain = -3
    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
        local c = tonumber(redis.call('hget', KEYS[1], f))
        if c ~= nil then
            for i = c, 1, -1 do
                local r = redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i)
                maxRemain = math.max(r, maxRemain)
            end
        end
    end
    if maxRemain > 0 then
        if mode == 'write' then
            -- Redisson sets maxRemain; the owner's write hold is never cut.
            maxRemain = math.max(maxRemain, redis.call('pttl', KEYS[1]))
        end
        redis.call('pexpire', KEYS[1], maxRemain)
        return own(n)
    end
    if mode == 'write' then
        return own(n)
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], '0')
return 0
