-- expire: set a held lock's TTL to a lease (the PEXPIRE a MultiLock or
-- RedLock makes on each member after a successful acquisition with a
-- lease, contract 5.4), only while the owner holds it.
--
-- KEYS[1]  lock key (the raw name)
-- ARGV[1]  owner field "<clientId>:<ownerId>" (with ":write" for a write lock)
-- ARGV[2]  lease in milliseconds
--
-- Replies: 1 when ARGV[1] holds the lock and its TTL is now ARGV[2]; 0
-- when ARGV[1] does not hold it (nothing was done). Redisson's expire() is
-- an unconditional PEXPIRE of the key; this one never touches a lock that
-- another owner took meanwhile. Idempotent: safe to resend.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
return 0
