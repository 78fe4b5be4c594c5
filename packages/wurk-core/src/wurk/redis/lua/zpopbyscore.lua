-- Removes and returns the lowest-scored member of a sorted set whose score is due.
-- The scheduler calls it in a loop over `retry` and `schedule`, one member per call,
-- so a due job leaves the set only when there is a caller ready to push it; the data
-- API walks a whole set with it (a `+inf` due time).
-- The call is fenced: it keeps a receipt of the member it took, so the same call
-- sent again after a lost reply returns that member instead of taking the next one,
-- which would leave the first in no key at all.
-- KEYS[1]: the sorted set (`retry`, `schedule`, `dead`)
-- KEYS[2]: the calling thread's pop receipt, `wurk:popped:<token>` ("<seq>:<score>:<member>")
-- ARGV[1]: now, epoch seconds as a decimal string (or `+inf`)
-- ARGV[2]: the call's sequence number (grows with every call of the thread)
-- ARGV[3]: the receipt's time to live, seconds
-- Returns: {member, score as a string}, or false when nothing is due.
local receipt = redis.call("GET", KEYS[2])
if receipt then
  local first = string.find(receipt, ":", 1, true)
  if tonumber(string.sub(receipt, 1, first - 1)) >= tonumber(ARGV[2]) then
    local second = string.find(receipt, ":", first + 1, true)
    return {string.sub(receipt, second + 1), string.sub(receipt, first + 1, second - 1)}
  end
end
local due = redis.call("ZRANGE", KEYS[1], "-inf", ARGV[1], "BYSCORE", "LIMIT", 0, 1, "WITHSCORES")
local member = due[1]
if member then
  redis.call("ZREM", KEYS[1], member)
  redis.call("SET", KEYS[2], ARGV[2] .. ":" .. due[2] .. ":" .. member, "EX", ARGV[3])
  return {member, due[2]}
end
return false
