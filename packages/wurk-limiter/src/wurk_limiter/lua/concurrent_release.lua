-- Give a concurrent slot back and count how long it was held, at Redis TIME.
-- A slot already reclaimed (its holder outlived lock_timeout) is not counted.
-- KEYS[1]: the held slots (ZSET lmtr-cs:<name>)
-- KEYS[2]: the metric counters (HASH lmtr-stats:<name>)
-- ARGV[1]: the slot token
-- ARGV[2]: lock_timeout, seconds (the slot's score minus this is when it was taken)
-- ARGV[3]: ttl of every key, seconds
-- Returns 1 when the slot was still held, 0 when it had been reclaimed.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
local held = now - (tonumber(expiry) - tonumber(ARGV[2]))
if held < 0 then
  held = 0
end
redis.call('HINCRBY', KEYS[2], 'held', 1)
redis.call('HINCRBYFLOAT', KEYS[2], 'held_time', string.format('%.6f', held))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3]))
return 1
