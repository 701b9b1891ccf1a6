-- fair_cancel: leave a fair lock's wait queue when a wait ends without the
-- lock (Redisson's acquireFailed, PROTOCOL.md 4.5), fenced. Runs after
-- fair_prelude.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  queue "redisson_lock_queue:{<raw>}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{<raw>}"
-- KEYS[4]  channel base "redisson_lock__channel:{<raw>}"
-- KEYS[5]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  owner field "<clientId>:<ownerId>"
-- ARGV[2]  the waiter's wait in ms (as its acquire calls passed it)
-- ARGV[3]  publish command: "PUBLISH" or "SPUBLISH"
--
-- Replies: 1 done (whether or not ARGV[1] was queued); 0 fenced: the fence
-- key exists (see fence.lua), nothing was done.
--
-- As Redisson's: every waiter after ARGV[1] gets its reservation pulled
-- forward by ARGV[2], and ARGV[1] leaves the queue and the timeouts. One
-- addition Java sees only as an early wake-up: when the lock is free and
-- another waiter is now first in line, it is notified ("0" on its channel),
-- so that an unlock message that reached the leaving waiter is not lost.
-- Idempotent while ARGV[1] does not queue again: after a lost reply the
-- call is fenced, then sent again with a fresh fence.
if redis.call('exists', KEYS[5]) == 1 then
    return 0
end
local queue = redis.call('lrange', KEYS[2], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do
    i = i + 1
end
-- Every write this call may make, checked before the first (acl_prelude.lua).
if i < #queue then
    acl_may('zincrby', KEYS[3], '0', queue[i + 1])
end
acl_may('zrem', KEYS[3], ARGV[1])
acl_may('lrem', KEYS[2], '0', ARGV[1])
if i == 1 and #queue > 1 then
    -- and the reads that follow a write, and the message to the head that
    -- stays (the first entry that is not ARGV[1]: LREM drops every copy)
    acl_may('exists', KEYS[1])
    acl_may('lindex', KEYS[2], '0')
    local j = 2
    while queue[j] == ARGV[1] do
        j = j + 1
    end
    if queue[j] and ARGV[3] ~= '' then
        acl_may(ARGV[3], KEYS[4] .. ':' .. queue[j], '0')
    end
end
if i <= #queue then
    for j = i + 1, #queue do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[j])
    end
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if i == 1 and #queue > 1 and redis.call('exists', KEYS[1]) == 0 then
    fair_notify(KEYS[2], KEYS[4], ARGV[3], '0')
end
return 1
