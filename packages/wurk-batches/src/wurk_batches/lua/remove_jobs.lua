-- Takes jids out of a batch: each one still live leaves the live set (and
-- the failed set), and total and pending go down by the number removed.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: its failed set `b-<bid>-failed`
-- KEYS[4]: its pending-children set `b-<bid>-pkids`
-- ARGV[1..n]: the jids
-- Returns: {how many were removed, live jids left, pending children}
if redis.call("EXISTS", KEYS[1]) == 0 then
  return {0, 0, 0}
end
local removed = 0
for i = 1, #ARGV do
  if redis.call("SREM", KEYS[2], ARGV[i]) == 1 then
    removed = removed + 1
    if redis.call("SREM", KEYS[3], ARGV[i]) == 1 then
      redis.call("HINCRBY", KEYS[1], "failures", -1)
    end
  end
end
if removed > 0 then
  redis.call("HINCRBY", KEYS[1], "total", -removed)
  redis.call("HINCRBY", KEYS[1], "pending", -removed)
end
return {removed, redis.call("SCARD", KEYS[2]), redis.call("SCARD", KEYS[4])}
