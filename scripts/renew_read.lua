-- renew_read: extend a batch of watchdog-held read locks (PROTOCOL.md 5.4,
-- as Redisson 4.4+: only this client's own readers' timeout keys).
--
-- KEYS[2i-1]  lock key (the raw name) of hold i (on a cluster, all in one slot)
-- KEYS[2i]    hold i's timeout prefix "{<raw>}:<clientId>:<ownerId>:rwlock_timeout"
-- ARGV[1]     lease in milliseconds (the watchdog timeout)
-- ARGV[i+1]   reader field "<clientId>:<ownerId>" of hold i
--
-- Returns one integer per hold: 1 where the reader still held the lock and
-- its timeout keys 1..count and the hash were extended, 0 where it was gone.
-- No TTL is ever shortened: not the hash's (Redisson 4.4+ sets it to the
-- lease, which can cut another reader's longer fixed lease), not a timeout
-- key's (a fixed-lease level of a hold that also has a watchdog level).
-- Java cannot tell the difference except by a longer TTL. Idempotent:
-- safe to resend.
local result = {}
local lease = tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
    local raw, prefix = KEYS[2 * i - 1], KEYS[2 * i]
    local c = tonumber(redis.call('hget', raw, ARGV[i + 1]) or 0)
    if c > 0 then
        for j = c, 1, -1 do
            local k = prefix .. ':' .. j
            if redis.call('pttl', k) < lease then
                redis.call('pexpire', k, lease)
            end
        end
        if redis.call('pttl', raw) < lease then
            redis.call('pexpire', raw, lease)
        end
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
