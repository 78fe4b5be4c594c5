-- Records one fire in a loop's history, newest first, keeping the last few.
-- Fenced (wurk.fence): the same call sent again after a lost reply records nothing
-- more, so a fire is never listed twice.
-- KEYS[1]: the loop's history, `loop-history:<lid>`
-- KEYS[2]: the calling thread's write fence, `wurk:fence:<token>`
-- ARGV[1]: the row, JSON `[fired_at, jid]`
-- ARGV[2]: how many rows to keep
-- ARGV[3]: the call's sequence number; ARGV[4]: the fence's time to live, seconds
-- Returns: 1 when recorded, 0 when this call had been applied already.
if tonumber(redis.call("GET", KEYS[2]) or "0") >= tonumber(ARGV[3]) then
  return 0
end
redis.call("SET", KEYS[2], ARGV[3], "EX", ARGV[4])
redis.call("LPUSH", KEYS[1], ARGV[1])
redis.call("LTRIM", KEYS[1], 0, tonumber(ARGV[2]) - 1)
return 1
