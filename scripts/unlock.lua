-- unlock: release one level of a Redisson RLock hold (PROTOCOL.md 2.3), fenced
-- and checked against the count the caller expects.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  channel "redisson_lock__channel:{<raw>}"
-- KEYS[3]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  unlock message, always "0"
-- ARGV[2]  lease in milliseconds restored after a partial unlock
-- ARGV[3]  owner field "<clientId>:<ownerId>"
-- ARGV[4]  publish command: "PUBLISH" or "SPUBLISH"; "" publishes nothing
--          (the spin lock, PROTOCOL.md 6)
-- ARGV[5]  the count of ARGV[3] the caller expects to find (its record)
-- ARGV[6]  fence TTL in milliseconds
--
-- Replies (this library's own encoding; Java never reads them):
--   n > 0   partial unlock: ARGV[3]'s count is now n, the TTL ARGV[2]
--   0       the lock was deleted and ARGV[1] published on KEYS[2]
--           (KEYS[2] is then unused when ARGV[4] is "")
--   -1      ARGV[3] does not hold the lock (and the caller expected that)
--   -2      fenced: the fence key exists (see fence.lua), nothing was done
--   {c}     refused: ARGV[3]'s count is c, not ARGV[5]; nothing was done
--           but marking KEYS[3] "s", so that fence.lua can tell
--
-- The data it writes and the message it publishes are exactly Redisson's.
-- Redisson's unlock latch is not needed: a lost reply is settled with
-- fence.lua (the Go client knows its own counts), so a retry never runs an
-- unlock twice, and no latch is written or deleted.
if redis.call('exists', KEYS[3]) == 1 then
    return -2
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or 0)
if prior ~= tonumber(ARGV[5]) then
    redis.call('set', KEYS[3], 's', 'px', ARGV[6])
    return {prior}
end
if prior == 0 then
    return -1
end
if prior == 1 then
    -- The last level: the message goes out before the hold is deleted
    -- (nothing runs in between, so no one can tell), and nothing is
    -- written before either: a PUBLISH or DEL the ACL denies fails the
    -- call with the hold untouched.
    if ARGV[4] ~= '' then
        redis.call(ARGV[4], KEYS[2], ARGV[1])
    end
    redis.call('del', KEYS[1])
    return 0
end
acl_may('pexpire', KEYS[1], ARGV[2]) -- before the first write (acl_prelude.lua)
local n = redis.call('hincrby', KEYS[1], ARGV[3], -1)
redis.call('pexpire', KEYS[1], ARGV[2])
return n
