-- force_unlock: delete a Redisson RLock whoever holds it (contract 1.5).
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  channel "redisson_lock__channel:{<raw>}"
-- ARGV[1]  unlock message, always "0"
-- ARGV[2]  publish command: "PUBLISH" or "SPUBLISH"
--
-- Returns 1 when the key existed (it is deleted and ARGV[1] published on
-- KEYS[2]), 0 otherwise.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
