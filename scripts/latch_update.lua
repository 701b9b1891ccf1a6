-- latch_update: the writes of a Redisson RCountDownLatch (PROTOCOL.md 12).
-- sync_prelude.lua runs first.
--
-- KEYS[1]  the latch key (the raw name): a string integer, the count
-- KEYS[2]  the channel "redisson_countdownlatch__channel__{<raw>}"
-- KEYS[3], KEYS[4]  fence and record keys (sync_prelude.lua)
-- ARGV[1..3]        sequence number, slot, TTL (sync_prelude.lua)
-- ARGV[4]  the operation:
--   "tryset" c   if the key is missing: SET c, publish 1 (NEW_COUNT),
--                reply 1; otherwise reply 0, nothing changed
--   "countdown"  DECR; at <= 0 the key is deleted; at exactly 0, publish 0
--                (ZERO_COUNT, the latch opens). Reply the count left (0
--                when it was missing or already 0; never below 0)
--   "delete"     if DEL removed the key: publish 1, reply 1; otherwise 0
-- ARGV[5]  "tryset": c
-- ARGV[#ARGV]  "PUBLISH" or "SPUBLISH"
-- Data-changing replies are recorded. Or the status FENCED
-- (sync_prelude.lua).
local op, pub = ARGV[4], ARGV[#ARGV]
acl_may(pub, KEYS[2], '0')
if op == 'countdown' then
    acl_may('del', KEYS[1])
end
if op == 'tryset' then
    if redis.call('exists', KEYS[1]) == 1 then
        return 0
    end
    redis.call('set', KEYS[1], ARGV[5])
    redis.call(pub, KEYS[2], 1)
    record('1')
    return 1
elseif op == 'countdown' then
    local v = redis.call('decr', KEYS[1])
    if v <= 0 then
        redis.call('del', KEYS[1])
    end
    if v == 0 then
        redis.call(pub, KEYS[2], 0)
    end
    v = math.max(v, 0)
    record(v)
    return v
elseif op == 'delete' then
    if redis.call('del', KEYS[1]) == 0 then
        return 0
    end
    redis.call(pub, KEYS[2], 1)
    record('1')
    return 1
end
return redis.error_reply('latch_update: unknown operation ' .. tostring(op))
