-- fair_prelude: functions shared by the fair lock's scripts (PROTOCOL.md 4),
-- prepended to each of fair_acquire, fair_unlock, fair_cancel and
-- fair_force_unlock (the script text Redis runs is the prelude followed by
-- the script; see scripts.go).

-- fair_stale returns how many waiters at the head of queue have a
-- reservation in timeouts that ended by now (ms), and the waiter after them
-- (nil when none): the head once fair_cleanup has run. It writes nothing.
-- A waiter met a second time stops it, as its score is gone by then in
-- the removing loop (a field can be in the list twice).
local function fair_stale(queue, timeouts, now)
    local i, seen = 0, {}
    while true do
        local w = redis.call('lindex', queue, i)
        if not w then
            return i, nil
        end
        local t = not seen[w] and redis.call('zscore', timeouts, w)
        if t and tonumber(t) <= tonumber(now) then
            seen[w] = true
            i = i + 1
        else
            return i, w
        end
    end
end

-- fair_cleanup removes stale waiters (PROTOCOL.md 4.2): while the head of
-- queue has a reservation in timeouts that ended by now (ms), drop it.
-- Only the head is checked, and no other score changes. A head without a
-- score stays (as in Redisson 3.31+). Before it removes anything it checks
-- the removals and, when publish is given (not nil or ""), a message to the
-- head that stays on "<channel>:<head>" (the caller's fair_notify) against
-- the caller's ACL (acl_prelude.lua): a refused call writes nothing. The
-- caller checks its own later writes before calling it.
local function fair_cleanup(queue, timeouts, now, channel, publish)
    local n, head = fair_stale(queue, timeouts, now)
    if n > 0 then
        acl_may('lpop', queue)
        acl_may('zrem', timeouts, 'x')
    end
    if head and publish and publish ~= '' then
        acl_may(publish, channel .. ':' .. head, '0')
    end
    for _ = 1, n do
        redis.call('zrem', timeouts, redis.call('lpop', queue))
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

