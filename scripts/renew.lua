-- renew: extend the TTL of a batch of watchdog-held locks (PROTOCOL.md 2.7).
--
-- KEYS[1..n]  lock keys (on a cluster, all in one hash slot)
-- ARGV[1]     lease in milliseconds (the watchdog timeout)
-- ARGV[i+1]   owner field "<clientId>:<ownerId>" for KEYS[i]
--
-- Returns an array of n integers: 1 where ARGV[i+1] still held KEYS[i] and its
-- TTL was set to ARGV[1] (or was longer: a TTL is never cut, unlike
-- Redisson's renewal, so that a longer fixed lease of the same hash, or a
-- read hold of a writer, is kept), 0 where the field was gone (the hold is
-- lost).
-- Idempotent: safe to resend.
local result = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[i], ARGV[1])
        end
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
