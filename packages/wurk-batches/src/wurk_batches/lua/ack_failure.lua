-- Books a batch job's failure (it raised and will be retried, or will die):
-- the jid joins the failed set and the failures gauge goes up, once per jid.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its failed set `b-<bid>-failed`
-- ARGV[1]: the jid
-- ARGV[2]: the batch's time to live when its hash has none, seconds
-- Returns: 1 when the failure was booked now, 0 when it was already, or the batch is gone
if redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
if redis.call("SADD", KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call("HINCRBY", KEYS[1], "failures", 1)
local ttl = redis.call("TTL", KEYS[1])
if ttl < 0 then
  ttl = tonumber(ARGV[2])
end
redis.call("EXPIRE", KEYS[2], ttl, "NX")
return 1
