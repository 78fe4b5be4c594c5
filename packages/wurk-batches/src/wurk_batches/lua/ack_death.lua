-- Books a batch job's death: the jid moves from the failed set (if it was
-- there, the failures gauge goes down) to the died set and leaves the live
-- set; pending is left alone, so the batch can complete but not succeed.
-- Only a live jid dies, so a death told twice is booked once; told again (or
-- sent again after a lost reply) it still answers that the jid is dead, so
-- the caller fires death, which fires at most once, instead of never. A job that
-- dies after its batch expired has its jid recorded in the died set, which
-- `EXPIRE ... NX` gives a clock: keys a late death brings back never live
-- forever, and live keys keep theirs.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: its failed set `b-<bid>-failed`
-- KEYS[4]: its died set `b-<bid>-died`
-- KEYS[5]: its pending-children set `b-<bid>-pkids`
-- ARGV[1]: the jid
-- ARGV[2]: the time to live of keys that have none, seconds
-- Returns: {1 if the batch exists else 0, 1 if the jid is dead (booked now or
-- before), live jids left, pending children}
local ttl = tonumber(ARGV[2])
if redis.call("EXISTS", KEYS[1]) == 0 then
  local added = redis.call("SADD", KEYS[4], ARGV[1])
  redis.call("SREM", KEYS[3], ARGV[1])
  redis.call("EXPIRE", KEYS[4], ttl, "NX")
  return {0, added, 0, 0}
end
if redis.call("SREM", KEYS[2], ARGV[1]) == 0 then
  local dead = redis.call("SISMEMBER", KEYS[4], ARGV[1])
  return {1, dead, redis.call("SCARD", KEYS[2]), redis.call("SCARD", KEYS[5])}
end
if redis.call("SREM", KEYS[3], ARGV[1]) == 1 then
  redis.call("HINCRBY", KEYS[1], "failures", -1)
end
redis.call("SADD", KEYS[4], ARGV[1])
local hash_ttl = redis.call("TTL", KEYS[1])
if hash_ttl > 0 then
  ttl = hash_ttl
end
redis.call("EXPIRE", KEYS[4], ttl, "NX")
return {1, 1, redis.call("SCARD", KEYS[2]), redis.call("SCARD", KEYS[5])}
