-- sem_update: the writes of a Redisson RSemaphore other than acquire
-- (PROTOCOL.md 10). sync_prelude.lua runs first.
--
-- KEYS[1]  the semaphore key (the raw name)
-- KEYS[2]  its channel "redisson_sc:{<raw>}"
-- KEYS[3], KEYS[4]  fence and record keys (sync_prelude.lua)
-- ARGV[1..3]        sequence number, slot, TTL (sync_prelude.lua)
-- ARGV[4]  the operation:
--   "release" n   INCRBY n (creating the key), publish the new value;
--                 reply and record the new value
--   "tryset" n    if the key is missing: SET n, publish n, reply and record
--                 1; otherwise reply 0 and change nothing
--   "add" d       SET (GET or 0) + d (dropping any TTL, as Redisson's
--                 plain SET does), publish the new value; reply and record it
--   "drain"       if the key exists: SET 0, reply and record the old value;
--                 otherwise reply 0
-- ARGV[5]  n or d (not for "drain")
-- ARGV[6]  "PUBLISH" or "SPUBLISH"
-- Or the status FENCED (sync_prelude.lua).
local op = ARGV[4]
if op == 'release' then
    acl_may(ARGV[6], KEYS[2], '0')
    local v = redis.call('incrby', KEYS[1], ARGV[5])
    redis.call(ARGV[6], KEYS[2], v)
    record(v)
    return v
elseif op == 'tryset' then
    if redis.call('exists', KEYS[1]) == 1 then
        return 0
    end
    acl_may(ARGV[6], KEYS[2], ARGV[5])
    redis.call('set', KEYS[1], ARGV[5])
    redis.call(ARGV[6], KEYS[2], ARGV[5])
    record('1')
    return 1
elseif op == 'add' then
    local v = (tonumber(redis.call('get', KEYS[1])) or 0) + tonumber(ARGV[5])
    acl_may(ARGV[6], KEYS[2], v)
    redis.call('set', KEYS[1], v)
    redis.call(ARGV[6], KEYS[2], v)
    record(v)
    return v
elseif op == 'drain' then
    local v = redis.call('get', KEYS[1])
    if not v then
        return 0
    end
    redis.call('set', KEYS[1], 0)
    record(v)
    return tonumber(v)
end
return redis.error_reply('sem_update: unknown operation ' .. tostring(op))
