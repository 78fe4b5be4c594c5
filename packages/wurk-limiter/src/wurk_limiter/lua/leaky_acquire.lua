-- Add one drop to a leaky bucket if it fits, at Redis TIME. The level drains
-- continuously at bucket_size / drain per second since the last call.
-- An admission is fenced (wurk.fence): the same call sent again after a lost
-- reply answers admitted without adding a second drop.
-- KEYS[1]: the bucket (HASH lmtr-l:<name>: level, last)
-- KEYS[2]: the limiter's metadata (HASH lmtr:<name>), whose TTL is refreshed
-- KEYS[3]: the calling thread's fence, `wurk:fence:<token>`
-- ARGV[1]: bucket_size (burst capacity)
-- ARGV[2]: drain, seconds for a full bucket to empty
-- ARGV[3]: ttl of every key, seconds
-- ARGV[4]: the call's sequence number; ARGV[5]: the fence's time to live, seconds
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
if tonumber(redis.call('GET', KEYS[3]) or '0') >= tonumber(ARGV[4]) then
  return {1, stamp, string.format('%.17g', level)} -- admitted by this very call
end
local admitted = 0
if level + 1 <= size then
  level = level + 1
  admitted = 1
  redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5])
end
redis.call('HSET', KEYS[1], 'level', string.format('%.17g', level), 'last', string.format('%.6f', math.max(now, last)))
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
if admitted == 1 then
  return {1, stamp, string.format('%.17g', level)}
end
return {0, stamp, string.format('%.17g', level), string.format('%.6f', now + (level + 1 - size) / rate)}
