-- psem_update: the count writes of a Redisson RPermitExpirableSemaphore
-- (PROTOCOL.md 11). As Redisson's, they do not give expired permits back
-- first. sync_prelude.lua runs first.
--
-- KEYS[1]  the permits key (the raw name)
-- KEYS[2]  the channel "redisson_sc:{<raw>}"
-- KEYS[3]  the timeout zset "{<raw>}:timeout"
-- KEYS[4], KEYS[5]  fence and record keys (sync_prelude.lua)
-- ARGV[1..3]        sequence number, slot, TTL (sync_prelude.lua)
-- ARGV[4]  the operation:
--   "tryset" n  if the permits key is missing: SET n, publish n, reply 1;
--               otherwise reply 0, nothing changed
--   "set" n     missing key: SET n, publish n. Otherwise total = available
--               + ZCOUNT of the zset; when total ~= n: INCRBY (n - total),
--               publish n. Reply 1 when something changed, else 0
--   "add" d     SET (GET or 0) + d; publish d only when d > 0; reply 1
-- ARGV[5]  n or d
-- ARGV[6]  "PUBLISH" or "SPUBLISH"
-- A reply of 1 is recorded. Or the status FENCED (sync_prelude.lua).
local op, n = ARGV[4], tonumber(ARGV[5])
acl_may(ARGV[6], KEYS[2], n)
if op == 'tryset' then
    if redis.call('exists', KEYS[1]) == 1 then
        return 0
    end
    redis.call('set', KEYS[1], n)
    redis.call(ARGV[6], KEYS[2], n)
elseif op == 'set' then
    local available = redis.call('get', KEYS[1])
    if not available then
        redis.call('set', KEYS[1], n)
    else
        local total = tonumber(available) + redis.call('zcount', KEYS[3], 0, '+inf')
        if total == n then
            return 0
        end
        redis.call('incrby', KEYS[1], n - total)
    end
    redis.call(ARGV[6], KEYS[2], n)
elseif op == 'add' then
    redis.call('set', KEYS[1], (tonumber(redis.call('get', KEYS[1])) or 0) + n)
    if n > 0 then
        redis.call(ARGV[6], KEYS[2], n)
    end
else
    return redis.error_reply('psem_update: unknown operation ' .. tostring(op))
end
record('1')
return 1
