-- acl_prelude: the check that comes before a script's first write, shared by
-- the scripts that would otherwise write before a command the caller's ACL
-- may deny (a PUBLISH to a channel the user lacks, a key pattern that misses
-- this library's own keys, a command taken away). It runs first; it has no
-- KEYS or ARGV of its own.
--
-- acl_may(command, arg...) raises a NOPERM error that names the command and
-- its first argument (the key or channel) when the calling user may not run
-- that command with those arguments, as redis.acl_check_cmd (Redis 7.0+,
-- Valkey) tells without running it. A script calls it for every write it may
-- make before it makes the first one, so a refused call writes nothing: a
-- permit is not taken, a count not changed and a hold not deleted while the
-- caller is told the call failed. The first write itself needs no check: if
-- it is refused, nothing was written before it. On servers without
-- acl_check_cmd (Redis 6) the check passes and a denied command fails where
-- it stands.
local function acl_may(...)
    if redis.acl_check_cmd and not redis.acl_check_cmd(...) then
        local cmd, target = ...
        error({err = 'NOPERM this user has no permissions to run the \'' .. string.lower(cmd) ..
            '\' command on \'' .. tostring(target) .. '\' (checked before any write: nothing was written)'})
    end
end
