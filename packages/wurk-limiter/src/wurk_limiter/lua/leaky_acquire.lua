-- Add one drop to a leaky bucket if it fits, at Redis TIME. The level drains
-- continuously at bucket_size / drain per second since the last call.
-- KEYS[1]: the bucket (HASH lmtr-l:<name>: level, last)
-- KEYS[2]: the limiter's metadata (HASH lmtr:<name>), whose TTL is refreshed
-- ARGV[1]: bucket_size (burst capacity)
-- ARGV[2]: drain, seconds for a full bucket to empty
-- ARGV[3]: ttl of every key, seconds
-- Returns {1, now, level} when admitted, {0, now, level, when one drop fits}
-- when refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local size = tonumber(ARGV[1])
local rate = size / tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'level', 'last')
local level = tonumber(state[1] or '0')
local last = tonumber(state[2] or tostring(now))
if now > last then
  level = math.max(0, level - (now - last) * rate)
end
local stamp = string.format('%.6f', now)
local admitted = 0
if level + 1 <= size then
  level = level + 1
  admitted = 1
end
redis.call('HSET', KEYS[1], 'level', string.format('%.17g', level), 'last', string.format('%.6f', math.max(now, last)))
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
if admitted == 1 then
  return {1, stamp, string.format('%.17g', level)}
end
return {0, stamp, string.format('%.17g', level), string.format('%.6f', now + (level + 1 - size) / rate)}
