-- sync_prelude: the exactness frame of every synchronizer write script
-- (semaphore, permit-expirable semaphore, count-down latch). It runs first;
-- the keys and arguments it uses are this library's own (Java never reads
-- them).
--
-- KEYS[#KEYS-1]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- KEYS[#KEYS]    the calling client's record key
--                "goredisson_ops:{<raw>}:<clientId>": a hash whose field is
--                a slot and whose value is "<seq>:<value>", the outcome of
--                the call in that slot that changed data
-- ARGV[1]        this call's sequence number (unique within the client)
-- ARGV[2]        this call's slot: the client gives each of its calls in
--                flight on the object a slot no other of them has, and
--                gives it again only once the call's outcome is known (or,
--                when it stays unknown, once the call can no longer reach
--                Redis), so a record is overwritten only after it is no
--                longer read
-- ARGV[3]        the TTL of the record key, ms (an hour). It is set again
--                when less than three quarters of it are left: every record
--                lives at least 45 minutes, a quarter of an hour more than
--                a lost reply's settling may start after its call
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
local sync_refresh = redis.call('pttl', sync_record_key) < tonumber(ARGV[3]) * 3 / 4
acl_may('hset', sync_record_key, ARGV[2], 'x')
if sync_refresh then
    acl_may('pexpire', sync_record_key, ARGV[3])
end
local function record(v)
    redis.call('hset', sync_record_key, ARGV[2], ARGV[1] .. ':' .. v)
    if sync_refresh then
        redis.call('pexpire', sync_record_key, ARGV[3])
    end
end
