-- Gives a dead process's claimed jobs back to their queue, counting each
-- recovery, and kills a job recovered for the third time (a poison pill) into
-- the dead set instead. All in one step, so no fetch can take a poison pill
-- between its return to the queue and its removal. Jobs move tail to tail:
-- the oldest claim is returned first, to where the next fetch looks.
-- The counter `super_fetch:recovered:<jid>` is named from each job, so it
-- cannot be passed in KEYS.
-- KEYS[1]: the dead owner's private list
-- KEYS[2]: the public queue
-- KEYS[3]: the `dead` sorted set
-- ARGV[1]: recoveries that make a poison pill (3)
-- ARGV[2]: the counter's time to live, seconds (72 h)
-- ARGV[3]: now, epoch seconds (the dead-set score)
-- ARGV[4]: dead-set age limit, seconds
-- ARGV[5]: dead-set size limit
-- ARGV[6]: the most jobs to move in this call
-- Returns: a flat list {job, recovery count, ...}.
local threshold = tonumber(ARGV[1])
local moved = {}
for _ = 1, tonumber(ARGV[6]) do
  local job = redis.call("LMOVE", KEYS[1], KEYS[2], "RIGHT", "RIGHT")
  if not job then
    break
  end
  local count = 0
  local ok, parsed = pcall(cjson.decode, job)
  if ok and type(parsed) == "table" and parsed["jid"] ~= nil then
    local counter = "super_fetch:recovered:" .. tostring(parsed["jid"])
    count = redis.call("INCR", counter)
    redis.call("EXPIRE", counter, tonumber(ARGV[2]))
    if count >= threshold then
      redis.call("LREM", KEYS[2], -1, job)
      redis.call("ZADD", KEYS[3], ARGV[3], job)
      redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", tonumber(ARGV[3]) - tonumber(ARGV[4]))
      redis.call("ZREMRANGEBYRANK", KEYS[3], 0, -tonumber(ARGV[5]))
    end
  end
  moved[#moved + 1] = job
  moved[#moved + 1] = count
end
return moved
