-- sem_acquire: take n permits of a Redisson RSemaphore if that many are
-- available (PROTOCOL.md 10, tryAcquire(n)). sync_prelude.lua runs first.
--
-- KEYS[1]  the semaphore key (the raw name): a string integer, the
--          available permits; missing means none
-- KEYS[2], KEYS[3]  fence and record keys (sync_prelude.lua)
-- ARGV[1..3]        sequence number, slot, TTL (sync_prelude.lua)
-- ARGV[4]  n > 0
--
-- Replies: 1 taken (DECRBY n; recorded "1"); 0 fewer than n available,
-- nothing changed; the status FENCED (sync_prelude.lua).
local v = tonumber(redis.call('get', KEYS[1]))
if v ~= nil and v >= tonumber(ARGV[4]) then
    redis.call('decrby', KEYS[1], ARGV[4])
    record('1')
    return 1
end
return 0
