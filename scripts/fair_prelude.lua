-- fair_prelude: functions shared by the fair lock's scripts (PROTOCOL.md 4),
-- prepended to each of fair_acquire, fair_unlock, fair_cancel and
-- fair_force_unlock (the script text Redis runs is the prelude followed by
-- the script; see scripts.go).

-- fair_cleanup removes stale waiters (PROTOCOL.md 4.2): while the head of
-- queue has a reservation in timeouts that ended by now (ms), drop it.
-- Only the head is checked, and no other score changes. A head without a
-- score stays (as in Redisson 3.31+).
local function fair_cleanup(queue, timeouts, now)
    while true do
        local first = redis.call('lindex', queue, 0)
        if not first then
            return
        end
        local t = redis.call('zscore', timeouts, first)
        if t and tonumber(t) <= tonumber(now) then
            redis.call('zrem', timeouts, first)
            redis.call('lpop', queue)
        else
            return
        end
    end
end

-- fair_notify publishes msg on the per-waiter channel of the head of queue
-- ("<channel>:<head>"), if there is a head and publish is not "".
local function fair_notify(queue, channel, publish, msg)
    local head = redis.call('lindex', queue, 0)
    if head and publish ~= '' then
        redis.call(publish, channel .. ':' .. head, msg)
    end
end

