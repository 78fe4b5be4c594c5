-- Sets fields of a batch's hash, only if the batch still exists, so that a
-- late write never brings back a hash without a TTL.
-- KEYS[1]: the batch hash `b-<bid>`
-- ARGV[2i-1], ARGV[2i]: a field and its value
-- Returns: 1 when written, 0 when the batch is gone
if redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
for i = 1, #ARGV, 2 do
  redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
