-- fence: settle a lock script call whose reply was lost (this library's own
-- script; Java never runs or reads it).
--
-- KEYS[1]  the lock hash (the raw name)
-- KEYS[2]  the lost call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  owner field ("<clientId>:<ownerId>", with ":write" for a
--          write lock)
-- ARGV[2]  fence TTL in milliseconds
--
-- Every fenced script (acquire, unlock, read and write acquire and unlock)
-- first checks its fence key and does nothing when it exists. This script
-- writes the fence key (keeping a mark the call left), so the lost call
-- can no longer run if it has not run yet.
--
-- Replies:
--   n       ARGV[1]'s count in KEYS[1] now (0 when absent); the call either
--           ran (and moved the count by one from what its caller expected)
--           or never will
--   {n}     the same count, and the call did run but refused to act because
--           the count was not the expected one (it marked KEYS[2] "s")
--   {n, t}  the same count, and the call was a fenced-lock grant that ran
--           and issued token t (it marked KEYS[2] "t<t>")
--
-- Idempotent: safe to resend.
local mark = redis.call('get', KEYS[2])
if not mark then
    redis.call('set', KEYS[2], '1', 'px', ARGV[2])
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
if mark == 's' then
    return {n}
end
if mark and string.sub(mark, 1, 1) == 't' then
    return {n, tonumber(string.sub(mark, 2))}
end
return n
