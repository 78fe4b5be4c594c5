-- Closes a `jobs` block: takes its token out of the live set.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: its pending-children set `b-<bid>-pkids`
-- ARGV[1]: the block's token
-- Returns: {1 if the batch exists else 0, live jids left, pending children}
if redis.call("EXISTS", KEYS[1]) == 0 then
  return {0, 0, 0}
end
redis.call("SREM", KEYS[2], ARGV[1])
return {1, redis.call("SCARD", KEYS[2]), redis.call("SCARD", KEYS[3])}
