-- acquire: take or re-enter a Redisson RLock (contract 1.2).
--
-- KEYS[1]  lock key (the raw name)
-- ARGV[1]  lease in milliseconds (the caller's lease, or the watchdog timeout)
-- ARGV[2]  owner field "<clientId>:<ownerId>"
--
-- Returns nil when the lock was taken or re-entered (the field's count was
-- incremented and the key's TTL set to ARGV[1]); otherwise the PTTL of the
-- key in milliseconds (-1 when the holder set no expiry).
--
-- Not idempotent (HINCRBY): callers must never resend it blindly.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
