-- Move a loop's fire marks, only if no one else moved them since we read them.
-- Two pollers that both believe they lead (a paused ex-leader, for a moment)
-- read the same `nf`; the first to get here advances it, the other finds it
-- changed and does not fire, so a tick enqueues at most once.
-- KEYS[1]: the loop's hash, `loops:<lid>`
-- KEYS[2]: `leader-token`
-- KEYS[3]: the calling thread's write fence, `wurk:fence:<token>` (see wurk.fence): the
--          same call sent again after a lost reply answers 1 again instead of finding
--          the marks it moved itself and refusing, which would skip the tick silently
-- ARGV[1]: the `nf` read before deciding ("" when none was stored; "*" to skip the check)
-- ARGV[2]: the `nf` to store ("" to clear it: the schedule never matches again)
-- ARGV[3]: the fire time to store as `lf` (ignored in mode "mark")
-- ARGV[4]: the caller's fencing token ("" when not acting as the leader)
-- ARGV[5]: mode: "tick" (a poller's fire: refused while paused), "force" (fire now), "mark" (only store `nf`)
-- ARGV[6]: the call's sequence number; ARGV[7]: the fence's time to live, seconds
-- Returns: 1 when the marks moved (the caller may enqueue), 0 when refused.
if tonumber(redis.call("GET", KEYS[3]) or "0") >= tonumber(ARGV[6]) then
  return 1 -- this very call moved them already
end
if redis.call("HEXISTS", KEYS[1], "schedule") == 0 then
  return 0 -- unregistered meanwhile
end
if ARGV[4] ~= "" and redis.call("GET", KEYS[2]) ~= ARGV[4] then
  return 0 -- a newer leader was promoted: we are stale
end
local paused = redis.call("HGET", KEYS[1], "paused")
if ARGV[5] == "tick" and (paused == "1" or paused == "true") then
  return 0
end
if ARGV[1] ~= "*" then
  local current = redis.call("HGET", KEYS[1], "nf") or ""
  if current ~= ARGV[1] then
    return 0
  end
end
if ARGV[2] == "" then
  redis.call("HDEL", KEYS[1], "nf")
else
  redis.call("HSET", KEYS[1], "nf", ARGV[2])
end
if ARGV[5] ~= "mark" then
  redis.call("HSET", KEYS[1], "lf", ARGV[3])
end
redis.call("SET", KEYS[3], ARGV[6], "EX", ARGV[7])
return 1
