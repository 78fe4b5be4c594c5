-- Gives a dead process's claimed jobs back to their queue and counts the
-- recoveries that can tell a poison pill: a job is counted when it is
-- recovered for the first time (nobody can tell yet whether it was running)
-- or when the dead process had marked it as a running suspect. So a job that
-- merely sat claimed beside the one that crashed the process is counted once
-- at most, and only a job that was running at each crash reaches the
-- threshold. A counted job becomes a suspect (the fetch marks it in its first
-- seconds of running); at the threshold it is a poison pill and goes to the
-- dead set instead, and its iteration state goes with it. All in one step, so
-- no fetch can take a poison pill between its return to the queue and its
-- removal. Jobs move tail to tail: the oldest claim is returned first, to
-- where the next fetch looks.
-- The counter `super_fetch:recovered:<id>` (id: the jid, or "sha1:<hex>" of a
-- payload without one) and an iterable job's state `it-<jid>` are named from
-- each job, so they cannot be passed in KEYS.
-- KEYS[1]: the dead owner's private list
-- KEYS[2]: the public queue
-- KEYS[3]: the `dead` sorted set
-- KEYS[4]: the suspects set (`super_fetch:suspects`)
-- KEYS[5]: the dead owner's running-suspects set
-- ARGV[1]: recoveries that make a poison pill (3)
-- ARGV[2]: the counter's time to live, seconds (72 h)
-- ARGV[3]: now, epoch seconds (the dead-set score)
-- ARGV[4]: dead-set age limit, seconds
-- ARGV[5]: dead-set size limit
-- ARGV[6]: the most jobs to move in this call
-- Returns: a flat list {job, recovery count, ...}.
local threshold = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local moved = {}
for _ = 1, tonumber(ARGV[6]) do
  local job = redis.call("LMOVE", KEYS[1], KEYS[2], "RIGHT", "RIGHT")
  if not job then
    break
  end
  local id
  local jid = false
  local ok, parsed = pcall(cjson.decode, job)
  if ok and type(parsed) == "table" and type(parsed["jid"]) == "string" then
    id = parsed["jid"]
    jid = true
  else
    id = "sha1:" .. redis.sha1hex(job)
  end
  local counter = "super_fetch:recovered:" .. id
  local count = tonumber(redis.call("GET", counter) or "0")
  if count == 0 or redis.call("SISMEMBER", KEYS[5], id) == 1 then
    count = redis.call("INCR", counter)
    redis.call("EXPIRE", counter, ttl)
  end
  if count >= threshold then
    redis.call("LREM", KEYS[2], -1, job)
    redis.call("SREM", KEYS[4], id)
    redis.call("ZADD", KEYS[3], ARGV[3], job)
    redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", tonumber(ARGV[3]) - tonumber(ARGV[4]))
    redis.call("ZREMRANGEBYRANK", KEYS[3], 0, -tonumber(ARGV[5]))
    if jid then
      redis.call("UNLINK", "it-" .. id)
    end
  else
    redis.call("SADD", KEYS[4], id)
    redis.call("EXPIRE", KEYS[4], ttl)
  end
  moved[#moved + 1] = job
  moved[#moved + 1] = count
end
return moved
