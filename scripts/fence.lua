-- fence: settle a lock script call whose reply was lost (this library's own
-- script; Java never runs or reads it).
--
-- KEYS[1]  the lock hash (the raw name)
-- KEYS[2]  the lost call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  owner field "<clientId>:<ownerId>"
-- ARGV[2]  fence TTL in milliseconds
--
-- Every fenced script (acquire, unlock) first checks its fence key and does
-- nothing when it exists. This script writes the fence key, so the lost
-- call can no longer run if it has not run yet, and returns ARGV[1]'s count
-- in KEYS[1] afterwards (0 when absent): the caller, the only writer of its
-- own field, compares it with the count before the call to learn whether
-- the call ran.
--
-- Idempotent: safe to resend.
redis.call('set', KEYS[2], '1', 'px', ARGV[2])
local n = redis.call('hget', KEYS[1], ARGV[1])
if n then
    return tonumber(n)
end
return 0
