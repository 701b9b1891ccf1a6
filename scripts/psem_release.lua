-- psem_release: give permits of a Redisson RPermitExpirableSemaphore back
-- by id (PROTOCOL.md 11, tryRelease(id) and tryRelease(ids)).
-- sync_prelude.lua and psem_prelude.lua run first.
--
-- KEYS[1]  the permits key (the raw name)
-- KEYS[2]  the channel "redisson_sc:{<raw>}"
-- KEYS[3]  the timeout zset "{<raw>}:timeout"
-- KEYS[4], KEYS[5]  fence and record keys (sync_prelude.lua)
-- ARGV[1..3]        sequence number, slot, TTL (sync_prelude.lua)
-- ARGV[4]  now, ms since the epoch
-- ARGV[5]  "PUBLISH" or "SPUBLISH"
-- ARGV[6]  "one" (Redisson's tryRelease(id)) or "all" (tryRelease(ids))
-- ARGV[7..]  the ids, 16 raw bytes each (exactly one for "one")
--
-- "one": the id leaves the zset, available += 1, the new count is
--        published; reply 1, or 0 when the permit had already expired (it
--        is given back all the same, as Redisson does); recorded as the
--        reply. An id not in the zset: reply 0, nothing changed.
-- "all": if any id is missing or expired: reply 0, nothing changed.
--        Otherwise, as Redisson: every expired permit goes back (the new
--        count published when > 0), the ids leave the zset, available +=
--        their number, that number is published and replied (recorded).
-- Or the status FENCED (sync_prelude.lua).
local now = tonumber(ARGV[4])
acl_may('zrem', KEYS[3], ARGV[7])
acl_may('incrby', KEYS[1], 1)
acl_may(ARGV[5], KEYS[2], '0')
if ARGV[6] == 'one' then
    local e = redis.call('zscore', KEYS[3], ARGV[7])
    if redis.call('zrem', KEYS[3], ARGV[7]) ~= 1 then
        return 0
    end
    redis.call(ARGV[5], KEYS[2], redis.call('incrby', KEYS[1], 1))
    local r = 1
    if tonumber(e) <= now then
        r = 0
    end
    record(r)
    return r
end
for i = 7, #ARGV do
    local e = redis.call('zscore', KEYS[3], ARGV[i])
    if not e or tonumber(e) <= now then
        return 0
    end
end
psem_reclaim(KEYS[1], KEYS[3], KEYS[2], ARGV[4], ARGV[5])
local ids = {}
for i = 7, #ARGV do
    ids[#ids + 1] = ARGV[i]
end
local removed = redis.call('zrem', KEYS[3], unpack(ids))
redis.call('incrby', KEYS[1], removed)
redis.call(ARGV[5], KEYS[2], removed)
record(removed)
return removed
