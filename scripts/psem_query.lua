-- psem_query: the reads of a Redisson RPermitExpirableSemaphore, and
-- updateLeaseTime (PROTOCOL.md 11). Each first gives every expired permit
-- back (psem_prelude.lua), as Redisson's do. Resending
-- one is safe: an expired permit goes back once, and an update sets the
-- same date again.
--
-- KEYS[1]  the permits key (the raw name)
-- KEYS[2]  the timeout zset "{<raw>}:timeout"
-- KEYS[3]  the channel "redisson_sc:{<raw>}"
-- ARGV[1]  the operation: "available", "permits", "acquired", "lease",
--          "update"
-- ARGV[2]  now, ms since the epoch
-- ARGV[3]  "PUBLISH" or "SPUBLISH"
-- ARGV[4]  "lease", "update": the id, 16 raw bytes
-- ARGV[5]  "update": the new expiry date (now + lease, or the marker)
-- ARGV[6]  "lease": the marker 922337203685477
--
-- Replies: "available" the available permits; "permits" available +
-- held; "acquired" held; "lease" -1 for a non-expiring permit, the ms left
-- for an expiring one, -2 for an unknown id; "update" 1 when the id was
-- held (its expiry is now ARGV[5]), else 0.
if ARGV[1] == 'update' then
    acl_may('zadd', KEYS[2], ARGV[5], ARGV[4])
end
-- The reads that follow the reclaim's writes.
acl_may('get', KEYS[1])
acl_may('zscore', KEYS[2], 'x')
psem_reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3])
local op = ARGV[1]
if op == 'available' then
    return tonumber(redis.call('get', KEYS[1]) or 0)
elseif op == 'permits' then
    local available = redis.call('get', KEYS[1])
    if not available then
        return 0
    end
    return tonumber(available) + redis.call('zcount', KEYS[2], 0, '+inf')
elseif op == 'acquired' then
    return redis.call('zcount', KEYS[2], 0, '+inf')
elseif op == 'lease' then
    local e = redis.call('zscore', KEYS[2], ARGV[4])
    if not e then
        return -2
    end
    if tonumber(e) == tonumber(ARGV[6]) then
        return -1
    end
    return tonumber(e) - tonumber(ARGV[2])
elseif op == 'update' then
    if not redis.call('zscore', KEYS[2], ARGV[4]) then
        return 0
    end
    redis.call('zadd', KEYS[2], ARGV[5], ARGV[4])
    return 1
end
return redis.error_reply('psem_query: unknown operation ' .. tostring(op))
