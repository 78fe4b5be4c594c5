-- Takes jids out of a batch: each one still live leaves the live set (and
-- the failed set), and total and pending go down by the number removed.
-- The call keeps a receipt of how many it removed, so that, sent again after a
-- lost reply, it answers that number instead of 0 (and the caller still looks
-- at whether the batch is finished).
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: its failed set `b-<bid>-failed`
-- KEYS[4]: its pending-children set `b-<bid>-pkids`
-- KEYS[5]: the calling thread's receipt, `wurk:batch-removed:<token>` ("<seq>:<removed>")
-- ARGV[1]: the call's sequence number (grows with every call of the thread, wurk.fence)
-- ARGV[2]: the receipt's time to live, seconds
-- ARGV[3..n]: the jids
-- Returns: {how many were removed, live jids left, pending children}
local receipt = redis.call("GET", KEYS[5])
if receipt then
  local colon = string.find(receipt, ":", 1, true)
  if tonumber(string.sub(receipt, 1, colon - 1)) >= tonumber(ARGV[1]) then
    local removed = tonumber(string.sub(receipt, colon + 1))
    return {removed, redis.call("SCARD", KEYS[2]), redis.call("SCARD", KEYS[4])}
  end
end
if redis.call("EXISTS", KEYS[1]) == 0 then
  return {0, 0, 0}
end
local removed = 0
for i = 3, #ARGV do
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
redis.call("SET", KEYS[5], ARGV[1] .. ":" .. removed, "EX", ARGV[2])
return {removed, redis.call("SCARD", KEYS[2]), redis.call("SCARD", KEYS[4])}
