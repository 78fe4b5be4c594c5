-- Registers a callback on a batch already in Redis, appending to the
-- event's list in place, so that two processes registering at once both
-- keep theirs. The list is a JSON array kept as text; appending to the text
-- (never decoding it) leaves each entry's options exactly as written.
-- The call is fenced (wurk.fence): sent again after a lost reply, it answers 1
-- without appending the entry a second time (which would run the callback
-- twice); the same entry registered twice on purpose is two calls, kept both.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: the event's marker `b-<bid>-<event>`
-- KEYS[3]: the calling thread's fence, `wurk:fence:<token>`
-- ARGV[1]: the event's field, `cb-<event>`
-- ARGV[2]: the entry, a JSON array [target, options]
-- ARGV[3]: the call's sequence number; ARGV[4]: the fence's time to live, seconds
-- Returns: 1 when registered, 0 when the event fired already (nothing is
-- written: the callback could never run), -1 when the batch is gone.
if tonumber(redis.call("GET", KEYS[3]) or "0") >= tonumber(ARGV[3]) then
  return 1 -- this very call registered it
end
if redis.call("EXISTS", KEYS[1]) == 0 then
  return -1
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  return 0
end
redis.call("SET", KEYS[3], ARGV[3], "EX", ARGV[4])
local current = redis.call("HGET", KEYS[1], ARGV[1])
if not current or current == "" or current == "[]" then
  redis.call("HSET", KEYS[1], ARGV[1], "[" .. ARGV[2] .. "]")
else
  redis.call("HSET", KEYS[1], ARGV[1], string.sub(current, 1, -2) .. "," .. ARGV[2] .. "]")
end
return 1
