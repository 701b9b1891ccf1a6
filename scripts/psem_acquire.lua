-- psem_acquire: take n permits of a Redisson RPermitExpirableSemaphore
-- under n new ids (PROTOCOL.md 11, the 3.23.4+ acquire). sync_prelude.lua
-- runs first.
--
-- KEYS[1]  the permits key (the raw name): a string integer, the available
--          permits
-- KEYS[2]  the timeout zset "{<raw>}:timeout": member a permit id's 16 raw
--          bytes, score its expiry (ms since the epoch) or the
--          non-expiring marker
-- KEYS[3]  the channel "redisson_sc:{<raw>}"
-- KEYS[4], KEYS[5]  fence and record keys (sync_prelude.lua)
-- ARGV[1..3]        sequence number, slot, TTL (sync_prelude.lua)
-- ARGV[4]  n > 0
-- ARGV[5]  the new permits' expiry date (now + lease, or the marker)
-- ARGV[6]  now, ms since the epoch (the client's clock, as Java's)
-- ARGV[7]  the marker 922337203685477
-- ARGV[8]  "PUBLISH" or "SPUBLISH"
-- ARGV[9..8+n]  the n new ids, 16 raw bytes each
--
-- First, as Redisson: up to n expired permits go back to the pool
-- (published as the new count when it is > 0; not recorded: giving an
-- expired permit back is the same whoever does it, and whenever). Then:
-- Replies: 1 taken (recorded "1"): available -= n, the ids are in the
--          zset, which gets the permits key's TTL if it has one;
--          d > 1: not enough permits; d is the nearest expiry date of a
--          held permit, when a waiter should look again;
--          0: not enough permits and none expires;
--          the status FENCED (sync_prelude.lua).
local n = tonumber(ARGV[4])
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[6], 'limit', 0, n)
if #expired > 0 then
    acl_may('zrem', KEYS[2], expired[1])
    acl_may('incrby', KEYS[1], #expired)
    acl_may(ARGV[8], KEYS[3], '0')
end
-- The writes of an acquisition, checked whether or not this call acquires:
-- a reclaim must not be the only thing a refused call did.
acl_may('decrby', KEYS[1], n)
acl_may('zadd', KEYS[2], ARGV[5], 'x')
acl_may('pexpire', KEYS[2], '1')
-- and the reads that follow a write
acl_may('get', KEYS[1])
acl_may('pttl', KEYS[1])
acl_may('zrange', KEYS[2], '0', '0')
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local v = redis.call('incrby', KEYS[1], #expired)
    if v > 0 then
        redis.call(ARGV[8], KEYS[3], v)
    end
end
local v = tonumber(redis.call('get', KEYS[1]))
if v ~= nil and v >= n then
    redis.call('decrby', KEYS[1], n)
    for i = 9, #ARGV do
        redis.call('zadd', KEYS[2], ARGV[5], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    record('1')
    return 1
end
local head = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if head[1] ~= nil and tonumber(head[2]) ~= tonumber(ARGV[7]) then
    return math.max(tonumber(head[2]), 2) -- never 1, the acquired reply
end
return 0
