-- sync_prelude: the exactness frame of every synchronizer write script
-- (semaphore, permit-expirable semaphore, count-down latch). It runs first;
-- the keys and arguments it uses are this library's own (Java never reads
-- them).
--
-- KEYS[#KEYS-1]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- KEYS[#KEYS]    the calling client's record key
--                "goredisson_ops:{<raw>}:<clientId>": a sorted set whose
--                score is a call's sequence number and whose member is
--                "<seq>:<value>", the outcome of a call that changed data
-- ARGV[1]        this call's sequence number (unique within the client)
-- ARGV[2]        the lowest sequence number of the client's calls whose
--                outcome it has not learnt yet: records below it are dropped
-- ARGV[3]        the TTL of the record key, ms (an hour; records are
--                dropped long before, once their calls are resolved)
-- The operation's own arguments start at ARGV[4].
--
-- A call whose fence key exists (sync_fence.lua settled it as not run) does
-- nothing and replies the status FENCED. A call that changes data calls
-- record(v) in the same script, so the change and its record are one atomic
-- step: after a lost reply sync_fence.lua finds the record (it ran) or fences
-- the call (it never will). Nothing is ever resent while it may have run.
--
-- acl_prelude.lua runs before it: the record's writes are checked here, and
-- each script checks its own writes before it makes the first (acl_may), so
-- a call the ACL refuses changes nothing, its record included.
local sync_fence_key, sync_record_key = KEYS[#KEYS - 1], KEYS[#KEYS]
if redis.call('exists', sync_fence_key) == 1 then
    return redis.status_reply('FENCED')
end
acl_may('zremrangebyscore', sync_record_key, '-inf', '(0')
acl_may('zadd', sync_record_key, '0', 'x')
acl_may('pexpire', sync_record_key, '1')
local function record(v)
    redis.call('zremrangebyscore', sync_record_key, '-inf', '(' .. ARGV[2])
    redis.call('zadd', sync_record_key, ARGV[1], ARGV[1] .. ':' .. v)
    redis.call('pexpire', sync_record_key, ARGV[3])
end
