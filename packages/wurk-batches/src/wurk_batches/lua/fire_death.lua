-- Fires death for a batch at most once, ever (a `SET NX` marker that
-- outlives a recovery), records it in `dead-batches` and pushes the death
-- callback jobs in the same step. The marker holds the `now` of the call that
-- set it: the same call sent again after a lost reply finds its own value and
-- answers "fired now" again, pushing nothing more.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its death marker `b-<bid>-death`
-- KEYS[3]: the `dead-batches` sorted set
-- KEYS[4]: the `queues` set
-- KEYS[5]: the callback queue's list `queue:<callback_queue>`
-- ARGV[1]: the bid
-- ARGV[2]: now, epoch seconds
-- ARGV[3]: the marker's time to live, seconds
-- ARGV[4]: the `cb-death` field the payloads were built from ("" for none)
-- ARGV[5]: the callback queue's name
-- ARGV[6]: "1" to push callbacks to the end the next fetch takes from, "0" to queue them last
-- ARGV[7..]: jid and payload of each death callback
-- Returns: 0 when the batch is gone, 1 when the callbacks changed since the
-- caller read them (read again), 2 when death fired before, 3 when it fired now.
if redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
if (redis.call("HGET", KEYS[1], "cb-death") or "") ~= ARGV[4] then
  return 1
end
if not redis.call("SET", KEYS[2], ARGV[2], "NX", "EX", tonumber(ARGV[3])) then
  if redis.call("GET", KEYS[2]) == ARGV[2] then
    return 3 -- this very call fired it
  end
  return 2
end
redis.call("HSET", KEYS[1], "death_at", ARGV[2])
redis.call("ZADD", KEYS[3], ARGV[2], ARGV[1])
-- Entries outlive their batches: each death drops the two oldest whose batch
-- hash has expired, so the set stays near the number of live dead batches.
for _, bid in ipairs(redis.call("ZRANGE", KEYS[3], 0, 1)) do
  if bid ~= ARGV[1] and redis.call("EXISTS", "b-" .. bid) == 0 then
    redis.call("ZREM", KEYS[3], bid)
  end
end
for i = 7, #ARGV, 2 do
  redis.call("SADD", KEYS[4], ARGV[5])
  if ARGV[6] == "1" then
    redis.call("RPUSH", KEYS[5], ARGV[i + 1])
  else
    redis.call("LPUSH", KEYS[5], ARGV[i + 1])
  end
end
return 3
