-- Books a batch job's success: the jid leaves the live set and pending goes
-- down by one, and if it was failing it leaves the failed set and the
-- failures gauge goes down. Idempotent: a job run twice (a worker killed
-- after the first run) is booked once.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: its failed set `b-<bid>-failed`
-- KEYS[4]: its pending-children set `b-<bid>-pkids`
-- ARGV[1]: the jid
-- Returns: {1 if the batch exists else 0, 1 if booked now, live jids left, pending children}
if redis.call("EXISTS", KEYS[1]) == 0 then
  return {0, 0, 0, 0}
end
local removed = redis.call("SREM", KEYS[2], ARGV[1])
if removed == 1 then
  redis.call("HINCRBY", KEYS[1], "pending", -1)
  if redis.call("SREM", KEYS[3], ARGV[1]) == 1 then
    redis.call("HINCRBY", KEYS[1], "failures", -1)
  end
end
return {1, removed, redis.call("SCARD", KEYS[2]), redis.call("SCARD", KEYS[4])}
