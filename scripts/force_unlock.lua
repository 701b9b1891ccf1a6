-- force_unlock: delete a Redisson lock whoever holds it (PROTOCOL.md 2.5; the
-- spin lock's, 5.1; the read and write lock's, 4.7).
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  channel: "redisson_lock__channel:{<raw>}", or for a read-write
--          lock "redisson_rwlock:{<raw>}"
-- KEYS[3]  this call's latch "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  message: "0" ("1" for a write lock)
-- ARGV[2]  publish command: "PUBLISH" or "SPUBLISH"; "" publishes nothing
--          (the spin lock: a bare delete)
-- ARGV[3]  latch TTL in milliseconds
-- ARGV[4]  optional: the mode field the hash must have ("read" or "write")
--          for the delete to happen; absent: any
--
-- Returns 1 when the key existed (with the mode asked for) and is deleted,
-- with ARGV[1] published on KEYS[2], 0 otherwise. The result is kept in
-- KEYS[3], and a call with a latch that exists returns it without running
-- again: a resend with the same latch (after a lost reply) is idempotent,
-- so it never deletes a hold taken after the first call ran. Force unlocks
-- are rare; the latch costs one short-lived key each.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local r = 0
if ARGV[4] == nil or redis.call('hget', KEYS[1], 'mode') == ARGV[4] then
    r = redis.call('exists', KEYS[1])
end
-- The message and the record before the DEL (nothing runs in between, so
-- no client can tell): a PUBLISH or SET the ACL denies fails the call
-- with the lock untouched.
-- The writes, checked before the first (acl_prelude.lua).
acl_may('set', KEYS[3], r, 'px', ARGV[3])
if r == 1 then
    acl_may('del', KEYS[1])
end
if r == 1 and ARGV[2] ~= '' then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
redis.call('set', KEYS[3], r, 'px', ARGV[3])
if r == 1 then
    redis.call('del', KEYS[1])
end
return r
