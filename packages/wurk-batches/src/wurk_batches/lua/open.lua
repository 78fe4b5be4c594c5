-- Opens a `jobs` block: creates the batch on its first block, and puts the
-- block's token in the live set, so that the batch cannot complete while the
-- block is still adding jobs (a fast worker could otherwise ack the first
-- job before the second is pushed).
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: the `batches` sorted set
-- KEYS[4]: the parent's hash (any key when there is no parent)
-- KEYS[5]: the parent's `-kids` set
-- KEYS[6]: the parent's `-pkids` set
-- KEYS[7..n]: the `tags:<tag>` set of each of the batch's tags (first block only)
-- ARGV[1]: the block's token
-- ARGV[2]: "new" for the batch's first block, "reopen" for any later one
-- ARGV[3]: the bid
-- ARGV[4]: created_at, epoch seconds
-- ARGV[5]: the batch's time to live, seconds
-- ARGV[6]: the parent's bid, "" for none
-- ARGV[7]: the hash fields, a JSON object of strings (first block only)
-- Returns: 1 when the block is open, 0 when a reopened batch is gone, -1
-- when a new batch's bid is taken already. A new batch's opening sent again
-- after a lost reply finds the batch it created, holding its own token (random
-- per block), and answers 1 again instead of calling the bid taken.
local exists = redis.call("EXISTS", KEYS[1]) == 1
if ARGV[2] == "reopen" then
  if not exists then
    return 0
  end
  redis.call("SADD", KEYS[2], ARGV[1])
  local ttl = redis.call("TTL", KEYS[1])
  if ttl > 0 then
    redis.call("EXPIRE", KEYS[2], ttl, "NX")
  end
  return 1
end
if exists then
  if redis.call("SISMEMBER", KEYS[2], ARGV[1]) == 1 then
    return 1 -- this very call created it
  end
  return -1
end
local ttl = tonumber(ARGV[5])
local fields = cjson.decode(ARGV[7])
for name, value in pairs(fields) do
  redis.call("HSET", KEYS[1], name, value)
end
redis.call("HSET", KEYS[1], "created_at", ARGV[4], "total", 0, "pending", 0, "failures", 0)
redis.call("EXPIRE", KEYS[1], ttl)
redis.call("SADD", KEYS[2], ARGV[1])
redis.call("EXPIRE", KEYS[2], ttl)
redis.call("ZADD", KEYS[3], ARGV[4], ARGV[3])
for i = 7, #KEYS do
  redis.call("SADD", KEYS[i], ARGV[3])
  redis.call("EXPIRE", KEYS[i], ttl, "GT")
  redis.call("EXPIRE", KEYS[i], ttl, "NX")
end
-- The index and the tag sets outlive the batches they list (every new batch
-- keeps them), so each new batch drops a few entries whose batch hash has
-- expired: the index's two oldest and two picked by the new bid's bytes, two
-- of each tag set at random. They stay near the number of live batches
-- instead of growing with every batch ever made.
local function drop_expired(key, bids, remove)
  for _, bid in ipairs(bids) do
    if bid ~= ARGV[3] and redis.call("EXISTS", "b-" .. bid) == 0 then
      redis.call(remove, key, bid)
    end
  end
end
local size = redis.call("ZCARD", KEYS[3])
local at = 0
for i = 1, #ARGV[3] do
  at = (at * 31 + string.byte(ARGV[3], i)) % size
end
drop_expired(KEYS[3], redis.call("ZRANGE", KEYS[3], 0, 1), "ZREM")
drop_expired(KEYS[3], redis.call("ZRANGE", KEYS[3], at, at + 1), "ZREM")
for i = 7, #KEYS do
  drop_expired(KEYS[i], redis.call("SRANDMEMBER", KEYS[i], 2), "SREM")
end
if ARGV[6] ~= "" and redis.call("EXISTS", KEYS[4]) == 1 then
  local parent_ttl = redis.call("TTL", KEYS[4])
  if parent_ttl < 0 then
    parent_ttl = ttl
  end
  redis.call("SADD", KEYS[5], ARGV[3])
  redis.call("SADD", KEYS[6], ARGV[3])
  redis.call("EXPIRE", KEYS[5], parent_ttl, "NX")
  redis.call("EXPIRE", KEYS[6], parent_ttl, "NX")
end
return 1
