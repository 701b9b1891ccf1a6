-- acquire: take or re-enter a Redisson RLock (PROTOCOL.md 2.2), fenced and
-- checked against the count the caller expects. It also serves the spin
-- lock (5.1, the same data), the fenced lock (5.2: with a token key) and
-- the non-reentrant lock (5.3: with ARGV[5] "n").
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  fenced lock only: the token key "redisson_lock_token:{<raw>}"
-- KEYS[#]  (the last) this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  lease in milliseconds (the caller's lease, or the watchdog timeout)
-- ARGV[2]  owner field "<clientId>:<ownerId>"
-- ARGV[3]  the count of ARGV[2] the caller expects to find (its record)
-- ARGV[4]  fence TTL in milliseconds
-- ARGV[5]  optional: "n" for a non-reentrant lock
--
-- Replies (this library's own encoding; Java never reads them):
--   n > 0   acquired or re-entered: ARGV[2]'s count is now n, the TTL ARGV[1]
--   {n, t}  the same for a fenced lock: t is the token this grant INCRed
--           (after a lost reply fence.lua reads it from the token key: the
--           owner has held the lock since, so no other grant ran)
--   0       fenced: the fence key exists (see fence.lua), nothing was done
--   r < 0   held by another owner; its PTTL is -2 - r (-1: no expiry)
--   {c}     refused: ARGV[2]'s count is c, not ARGV[3] (the hold changed
--           behind the caller's back: expired, force-unlocked); nothing was
--           done but marking the fence key "s", so that fence.lua can tell
--   HELD    (status) non-reentrant and ARGV[2] holds it: nothing was done
--           (Redisson replies with the error NON_REENTRANT_REACQUIRE)
--
-- The data it writes is exactly Redisson's (HINCRBY, PEXPIRE, INCR). Not
-- idempotent: it is never resent while an earlier call may still run; a
-- lost reply is settled with fence.lua. It runs only when the count is the
-- expected one, so a settled call ran exactly when the count moved by one.
local fence = KEYS[#KEYS]
if redis.call('exists', fence) == 1 then
    return 0
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if prior ~= tonumber(ARGV[3]) then
    redis.call('set', fence, 's', 'px', ARGV[4])
    return {prior}
end
if prior > 0 and ARGV[5] == 'n' then
    return redis.status_reply('HELD')
end
if prior > 0 or redis.call('exists', KEYS[1]) == 0 then
    -- Every call after the first write is checked before it
    -- (acl_prelude.lua), so a call the ACL refuses writes nothing: no hold
    -- without a TTL, no token without a grant, no re-entry's TTL
    -- refreshed. On a missing key the first PEXPIRE does nothing and is
    -- its own check: a new plain hold needs none.
    if prior > 0 or #KEYS == 3 then
        acl_may('hincrby', KEYS[1], ARGV[2], '1')
    end
    if prior > 0 and #KEYS == 3 then
        acl_may('incr', KEYS[2])
    end
    redis.call('pexpire', KEYS[1], ARGV[1])
    local token
    if #KEYS == 3 then
        token = redis.call('incr', KEYS[2])
    end
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if token then
        return {n, token}
    end
    return n
end
return -2 - redis.call('pttl', KEYS[1])
