-- inspect: one consistent read of everything a Redisson lock or
-- synchronizer keeps under a name, for the rlock tool's status, watch and
-- wait lines. It writes nothing; resending it is safe.
--
-- KEYS[1]  the name (a lock hash, or a semaphore's or latch's counter)
-- KEYS[2]  the fair lock's queue "redisson_lock_queue:{<raw>}"
-- KEYS[3]  the fair lock's timeouts "redisson_lock_timeout:{<raw>}"
-- KEYS[4]  the fenced lock's token "redisson_lock_token:{<raw>}"
-- KEYS[5]  the permit-expirable semaphore's zset "{<raw>}:timeout"
--
-- Reply: an array of
--   1  the name's TYPE ("none", "hash", "string", ...)
--   2  the hash's fields and values (HGETALL), empty unless a hash
--   3  the string value, false unless a string
--   4  the name's PTTL (-2 absent, -1 no expiry)
--   5  the queue's entries in order, empty unless a list
--   6  the timeouts' members and scores, empty unless a zset
--   7  the token, false unless a string
--   8  the permit zset's members (raw ids) and scores, empty unless a zset
local function typ(k)
    return redis.call('type', k)['ok']
end
local t = typ(KEYS[1])
local hash, value = {}, false
if t == 'hash' then
    hash = redis.call('hgetall', KEYS[1])
elseif t == 'string' then
    value = redis.call('get', KEYS[1])
end
local queue, timeouts, token, permits = {}, {}, false, {}
if typ(KEYS[2]) == 'list' then
    queue = redis.call('lrange', KEYS[2], 0, -1)
end
if typ(KEYS[3]) == 'zset' then
    timeouts = redis.call('zrange', KEYS[3], 0, -1, 'WITHSCORES')
end
if typ(KEYS[4]) == 'string' then
    token = redis.call('get', KEYS[4])
end
if typ(KEYS[5]) == 'zset' then
    permits = redis.call('zrange', KEYS[5], 0, -1, 'WITHSCORES')
end
return {t, hash, value, redis.call('pttl', KEYS[1]), queue, timeouts, token, permits}
