-- read_locked: whether a Redisson RReadWriteLock is read-locked (PROTOCOL.md
-- 5.7, isLocked of the read lock since 3.24.0).
--
-- KEYS[1]  lock key (the raw name)
--
-- Returns 1 when the mode is "read", or "write" with at least one reader
-- besides the writer (a writer that also reads); 0 otherwise. Read-only.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
