-- Removes and returns the lowest-scored member of a sorted set whose score is due.
-- The scheduler calls it in a loop over `retry` and `schedule`, one member per call,
-- so a due job leaves the set only when there is a caller ready to push it.
-- KEYS[1]: the sorted set (`retry` or `schedule`)
-- ARGV[1]: now, epoch seconds as a decimal string
-- Returns: the member, or false when nothing is due.
local due = redis.call("ZRANGE", KEYS[1], "-inf", ARGV[1], "BYSCORE", "LIMIT", 0, 1)
local member = due[1]
if member then
  redis.call("ZREM", KEYS[1], member)
  return member
end
return false
