-- psem_prelude: a function the permit-expirable semaphore's scripts share
-- (PROTOCOL.md 11). It runs first (after sync_prelude.lua, if any).
--
-- psem_reclaim(permits, timeouts, channel, now, publish) gives every
-- expired permit back, as Redisson's scripts do first: the ids whose score
-- is at most now leave the timeout zset, the permits key grows by their
-- number, and the new count is published when it is > 0. ZCOUNT and
-- ZREMRANGEBYSCORE rather than Redisson's ZREM of the ids: the same
-- effect, with no limit on how many expired at once (Lua unpacks at most
-- about 8000).
local function psem_reclaim(permits, timeouts, channel, now, publish)
    local expired = redis.call('zcount', timeouts, 0, now)
    if expired > 0 then
        acl_may('zremrangebyscore', timeouts, 0, now)
        acl_may('incrby', permits, expired)
        acl_may(publish, channel, '0')
        redis.call('zremrangebyscore', timeouts, 0, now)
        local v = redis.call('incrby', permits, expired)
        if v > 0 then
            redis.call(publish, channel, v)
        end
    end
end
