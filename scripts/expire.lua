-- expire: set a held lock's TTL to a lease (the PEXPIRE a MultiLock or
-- RedLock makes on each member after a successful acquisition with a
-- lease, PROTOCOL.md 9), only while the owner holds it, fenced.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  owner field "<clientId>:<ownerId>" (with ":write" for a write lock)
-- ARGV[2]  lease in milliseconds
--
-- Replies: 1 when ARGV[1] holds the lock and its TTL is now ARGV[2]; 0
-- when ARGV[1] does not hold it (nothing was done); -1 fenced: the fence
-- key exists (see fence.lua), nothing was done. Redisson's expire() is an
-- unconditional PEXPIRE of the key; this one never touches a lock that
-- another owner took meanwhile. After a lost reply the call is fenced (a
-- late copy must not shorten a hold taken again since) and sent again.
if redis.call('exists', KEYS[2]) == 1 then
    return -1
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
return 0
