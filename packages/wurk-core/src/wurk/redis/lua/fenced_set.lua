-- Writes a key for a leader, unless a newer leader has been promoted since.
-- A stale leader (paused past its TTL, then resumed) still holds the token it
-- took at its promotion; every promotion bumps `leader-token`, so comparing
-- them here, in the same step as the write, refuses the stale write.
-- KEYS[1]: `leader-token`
-- KEYS[2]: the key to write
-- ARGV[1]: the writer's fencing token, taken at its promotion
-- ARGV[2]: the value
-- ARGV[3]: time to live, seconds; 0 for none
-- Returns: 1 when written, 0 when refused.
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return 0
end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call("SET", KEYS[2], ARGV[2], "EX", ttl)
else
  redis.call("SET", KEYS[2], ARGV[2])
end
return 1
