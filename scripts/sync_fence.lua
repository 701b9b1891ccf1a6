-- sync_fence: settle a synchronizer script call whose reply was lost (this
-- library's own script; Java never runs or reads it). See sync_prelude.lua.
--
-- KEYS[1]  the lost call's fence key "goredisson_fence:{<raw>}:<32 hex id>"
-- KEYS[2]  the client's record key "goredisson_ops:{<raw>}:<clientId>"
-- ARGV[1]  the lost call's sequence number
-- ARGV[2]  fence TTL, ms
-- ARGV[3]  the lost call's slot
--
-- Reply:
--   "<seq>:<value>"  the call ran and changed data; value is its record
--   nil              the call did not change anything and never will: it
--                    had not run (its fence key is now set, so a late copy
--                    does nothing), or it ran and left everything as it was
--
-- The slot holds no other call's record while this one is unsettled, only
-- an earlier call's, whose seq differs.
--
-- Idempotent: safe to resend.
local r = redis.call('hget', KEYS[2], ARGV[3])
if r and string.sub(r, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
    return r
end
redis.call('set', KEYS[1], 'f', 'px', ARGV[2])
return false
