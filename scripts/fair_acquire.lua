-- fair_acquire: take, re-enter or queue for a Redisson RFairLock (PROTOCOL.md
-- 4.3 and 4.4; the non-reentrant fair lock, 5.3, with ARGV[8] "n"), fenced
-- and checked against the count the caller expects. Runs after
-- fair_prelude.
--
-- KEYS[1]  lock key (the raw name)
-- KEYS[2]  queue "redisson_lock_queue:{<raw>}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{<raw>}"
-- KEYS[4]  this call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<clientId>:<ownerId>"
-- ARGV[3]  the count of ARGV[2] the caller expects to find (its record)
-- ARGV[4]  fence TTL in milliseconds
-- ARGV[5]  the waiter's wait in ms (its reservation per place in line)
-- ARGV[6]  now, the caller's clock in ms since the epoch (as Redisson's)
-- ARGV[7]  "q": a waiter's attempt, which queues ARGV[2] when the lock is
--          not free for it (the long variant, 3.3); "": a single attempt,
--          which never queues (the boolean variant, 3.4)
-- ARGV[8]  optional: "n" for a non-reentrant fair lock
--
-- Replies (this library's own encoding; Java never reads them):
--   n > 0   acquired or re-entered: ARGV[2]'s count is now n, the TTL ARGV[1]
--   0       fenced: the fence key exists (see fence.lua), nothing was done
--   r < 0   not acquired; wait at most -2 - r ms before trying again (-1:
--           until a message): the lock's PTTL while it is held, otherwise
--           (free, another waiter first in line) at most 100 ms, or until
--           the head's reservation ends if sooner. With "q", ARGV[2] is
--           now queued.
--   {c}     refused: ARGV[2]'s count is c, not ARGV[3]; nothing was done
--           but marking the fence key "s", so that fence.lua can tell
--   HELD    (status) non-reentrant and ARGV[2] holds it: nothing was done
--           (Redisson replies with the error NON_REENTRANT_REACQUIRE)
--
-- The data it writes is exactly Redisson's: the stale cleanup, the grant
-- that pops the head and pulls every other reservation forward by ARGV[5]
-- (with the same scores, in bulk: fair_pull_forward),
-- re-entry, and the enqueue whose reservation is the last waiter's (or the
-- lock's PTTL) plus ARGV[5]. Queueing again is a no-op (the waiter keeps
-- its place), but the grant is not idempotent: a lost reply is settled
-- with fence.lua, never by resending.

-- fair_bulk_ok tells whether the server can check the caller's ACL (Redis
-- 7+, Valkey) and it allows every command of fair_pull_forward's bulk path.
-- It writes nothing and raises nothing (it runs after the grant's first
-- writes): a command the server does not know (renamed away) raises in
-- acl_check_cmd, and is a false here too. A false only selects the
-- ZINCRBYs, which the caller checked with its other writes.
local function fair_bulk_ok(timeouts, tmp)
    local may = redis.acl_check_cmd
    if may == nil then
        return false
    end
    local ran, ok = pcall(function()
        return may('pttl', timeouts) and may('sadd', tmp, 'x') and
            may('zunionstore', timeouts, '2', timeouts, tmp, 'WEIGHTS', '1', '0') and may('del', tmp)
    end)
    return ran and ok
end

-- fair_pull_forward moves every reservation in timeouts forward by wait ms,
-- as Redisson's grant does with one ZINCRBY per waiter (PROTOCOL.md 4.3).
-- In bulk, one ZUNIONSTORE of timeouts with a set of its members weighted
-- -wait writes the same scores: each is score + (-wait), the one addition
-- ZINCRBY makes. The set lives in tmp, a key of the same slot that does not
-- exist (this call's fence key), only within this script. ZUNIONSTORE
-- replaces the key and so would drop a TTL: a timeouts key with one (set by
-- Java's expire) takes the ZINCRBYs, as does a queue of three or fewer,
-- where the bulk path's commands cost more than the ZINCRBYs. What differs
-- is below the data: the key's internal encoding may change (listpack or
-- skiplist, as after a restart or a replica's full sync), and keyspace
-- events name sadd, zunionstore and del instead of one zincr per waiter.
local function fair_pull_forward(timeouts, wait, tmp)
    local all = redis.call('zrange', timeouts, 0, -1)
    if #all > 3 and fair_bulk_ok(timeouts, tmp) and redis.call('pttl', timeouts) == -1 then
        for i = 1, #all, 4000 do
            redis.call('sadd', tmp, unpack(all, i, math.min(#all, i + 3999)))
        end
        redis.call('zunionstore', timeouts, 2, timeouts, tmp, 'WEIGHTS', 1, -wait)
        redis.call('del', tmp)
        return
    end
    for i = 1, #all do
        redis.call('zincrby', timeouts, -wait, all[i])
    end
end

local fence = KEYS[4]
if redis.call('exists', fence) == 1 then
    return 0
end
local prior = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if prior ~= tonumber(ARGV[3]) then
    redis.call('set', fence, 's', 'px', ARGV[4])
    return {prior}
end
local now = tonumber(ARGV[6])
local wait = tonumber(ARGV[5])
-- Every write this call may make, checked before the first (acl_prelude.lua).
acl_may('lpop', KEYS[2])
acl_may('zrem', KEYS[3], ARGV[2])
acl_may('zincrby', KEYS[3], '0', ARGV[2])
acl_may('hset', KEYS[1], ARGV[2], '1')
acl_may('hincrby', KEYS[1], ARGV[2], '1')
acl_may('pexpire', KEYS[1], ARGV[1])
if ARGV[7] == 'q' then
    acl_may('zadd', KEYS[3], '0', ARGV[2])
    acl_may('rpush', KEYS[2], ARGV[2])
end
-- and the reads that follow a write
acl_may('exists', KEYS[1])
acl_may('pttl', KEYS[1])
acl_may('lindex', KEYS[2], '0')
acl_may('zscore', KEYS[3], ARGV[2])
acl_may('zrange', KEYS[3], '0', '-1')
fair_cleanup(KEYS[2], KEYS[3], now)
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if not head or head == ARGV[2] then
        -- PEXPIRE on the missing key first: it does nothing, and a user
        -- whose ACL denies it fails here, before the queue changes or a
        -- hold without a TTL is written.
        redis.call('pexpire', KEYS[1], ARGV[1])
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], ARGV[2])
        fair_pull_forward(KEYS[3], wait, fence)
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return 1
    end
end
if prior > 0 then
    if ARGV[8] == 'n' then
        return redis.status_reply('HELD')
    end
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return n
end
if ARGV[7] == 'q' and not redis.call('zscore', KEYS[3], ARGV[2]) then
    local last = redis.call('lindex', KEYS[2], -1)
    local ttl
    local lastScore = false
    if last and last ~= ARGV[2] then
        lastScore = redis.call('zscore', KEYS[3], last)
    end
    if lastScore then
        ttl = tonumber(lastScore) - now
    else
        ttl = redis.call('pttl', KEYS[1])
    end
    if redis.call('zadd', KEYS[3], ttl + wait + now, ARGV[2]) == 1 then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
end
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    -- Free, but another waiter is first in line: it takes the lock at
    -- once (no message follows), or it is gone and the cleanup drops it
    -- when its reservation ends. Look again soon (Redisson's waiter polls
    -- at once).
    local head = redis.call('lindex', KEYS[2], 0)
    local t = head and redis.call('zscore', KEYS[3], head)
    pttl = 100
    if t then
        pttl = math.max(1, math.min(100, tonumber(t) - now))
    end
end
return -2 - pttl
