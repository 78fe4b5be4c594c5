-- Pushes one batch's jobs and registers them, in one step, so that the
-- batch's counters never disagree with what is queued. A jid the batch
-- already holds (a job pushed again by hand) is not counted twice, and a
-- dead jid retried from the dead set moves back to the live set uncounted.
-- A batch that is gone gets its jobs pushed and nothing else.
-- The call is fenced (wurk.fence): sent again after a lost reply, it finds its
-- sequence number already stored and does nothing, so no job is pushed twice.
-- (The live set cannot tell a call sent again from a job pushed again by hand,
-- nor from one a worker took and acked in between.)
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: its died set `b-<bid>-died`
-- KEYS[4]: the `queues` set
-- KEYS[5]: the `schedule` sorted set
-- KEYS[6]: the calling thread's fence, `wurk:fence:<token>`
-- KEYS[7..n]: for each job in ARGV order, its `queue:<name>` list
-- ARGV[1]: the batch's time to live when its hash has none, seconds
-- ARGV[2]: the call's sequence number; ARGV[3]: the fence's time to live, seconds
-- ARGV[4i], ARGV[4i+1], ARGV[4i+2], ARGV[4i+3]: job i's jid, queue name,
-- due time ("" to push it now, "-" to count it only, else epoch seconds for
-- the schedule) and payload
-- Returns: how many jobs were new to the batch (added to total and pending);
-- 0 when this call had been applied already.
if tonumber(redis.call("GET", KEYS[6]) or "0") >= tonumber(ARGV[2]) then
  return 0
end
redis.call("SET", KEYS[6], ARGV[2], "EX", ARGV[3])
local exists = redis.call("EXISTS", KEYS[1]) == 1
local added = 0
for i = 7, #KEYS do
  local base = 4 + (i - 7) * 4
  local jid = ARGV[base]
  if exists and redis.call("SISMEMBER", KEYS[2], jid) == 0 then
    if redis.call("SMOVE", KEYS[3], KEYS[2], jid) == 0 then
      redis.call("SADD", KEYS[2], jid)
      added = added + 1
    end
  end
  if ARGV[base + 2] == "-" then
    -- counted only: a testing mode runs or holds the job itself
  elseif ARGV[base + 2] == "" then
    redis.call("SADD", KEYS[4], ARGV[base + 1])
    redis.call("LPUSH", KEYS[i], ARGV[base + 3])
  else
    redis.call("ZADD", KEYS[5], ARGV[base + 2], ARGV[base + 3])
  end
end
if exists then
  if added > 0 then
    redis.call("HINCRBY", KEYS[1], "total", added)
    redis.call("HINCRBY", KEYS[1], "pending", added)
  end
  local ttl = redis.call("TTL", KEYS[1])
  if ttl < 0 then
    ttl = tonumber(ARGV[1])
  end
  redis.call("EXPIRE", KEYS[2], ttl, "NX")
end
return added
