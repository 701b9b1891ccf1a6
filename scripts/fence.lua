-- fence: settle a lock script call whose reply was lost (this library's own
-- script; Java never runs or reads it).
--
-- KEYS[1]  the lock hash (the raw name)
-- KEYS[2]  the lost call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- KEYS[3]  optional: with ARGV[3] "t", a fenced lock's token key
--          "redisson_lock_token:{<raw>}"; with ARGV[3] "r", the owner's read
--          timeout prefix "{<raw>}:<clientId>:<ownerId>:rwlock_timeout"
-- ARGV[1]  owner field ("<clientId>:<ownerId>", with ":write" for a
--          write lock)
-- ARGV[2]  fence TTL in milliseconds
-- ARGV[3]  optional: "t" or "r", what KEYS[3] is
--
-- Every fenced script (acquire, unlock, read and write acquire and unlock)
-- first checks its fence key and does nothing when it exists. This script
-- writes the fence key (keeping a mark the call left), so the lost call
-- can no longer run if it has not run yet.
--
-- Reply: {n, refused, token, pttl}
--   n        ARGV[1]'s count in KEYS[1] now (0 when absent); the call either
--            ran (and moved the count by one from what its caller expected)
--            or never will
--   refused  1 when the call did run but refused to act because the count
--            was not the expected one (it marked KEYS[2] "s"), else 0
--   token    the token key's value (0 when absent or not given). When n is
--            one more than the count a fenced grant expected, this is the
--            token that grant issued: the owner has held the lock ever
--            since, and only a holder's grant increments the token
--   pttl     PTTL of KEYS[1]; with a read prefix, the longest PTTL of the
--            owner's n timeout keys (what its read holds have left)
--
-- Idempotent: safe to resend.
local mark = redis.call('get', KEYS[2])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0) or 0
local token = 0
local pttl = redis.call('pttl', KEYS[1])
if ARGV[3] == 't' then
    token = tonumber(redis.call('get', KEYS[3]) or 0) or 0
elseif ARGV[3] == 'r' then
    pttl = -2
    for i = 1, n do
        pttl = math.max(pttl, redis.call('pttl', KEYS[3] .. ':' .. i))
    end
end
-- The fence is written last, after every read: a read the ACL refuses
-- leaves nothing behind (the script is atomic, so the order is otherwise
-- invisible).
if not mark then
    redis.call('set', KEYS[2], '1', 'px', ARGV[2])
end
local refused = 0
if mark == 's' then
    refused = 1
end
return {n, refused, token, pttl}
