-- Charge a sliding-window limiter, at Redis TIME: entries older than the
-- window are trimmed, then the charge is admitted only if all of it fits.
-- The entries are named after the call (the same on every sending of one
-- call): sent again after a lost reply, the call finds its first entry and
-- answers admitted, instead of charging a second time.
-- KEYS[1]: the entries inside the window (ZSET lmtr-w:<name>, score = epoch)
-- KEYS[2]: the limiter's metadata (HASH lmtr:<name>), whose TTL is refreshed
-- ARGV[1]: count allowed in any window
-- ARGV[2]: window length, seconds
-- ARGV[3]: ttl of every key, seconds
-- ARGV[4]: entries to add (the charge)
-- ARGV[5]: a token unique to this call (the same on every sending of it), prefix of its entries' members
-- Returns {1, now, used} when admitted, {0, now, used, when the oldest entry
-- leaves the window} when refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local window = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local stamp = string.format('%.6f', now)
if redis.call('ZSCORE', KEYS[1], ARGV[5] .. ':1') then
  return {1, stamp, redis.call('ZCARD', KEYS[1])} -- charged by this very call
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
local charge = tonumber(ARGV[4])
redis.call('EXPIRE', KEYS[2], ttl)
if used + charge <= tonumber(ARGV[1]) then
  for i = 1, charge do
    redis.call('ZADD', KEYS[1], now, ARGV[5] .. ':' .. i)
  end
  redis.call('EXPIRE', KEYS[1], ttl)
  return {1, stamp, used + charge}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local leaves = ''
if oldest[2] then
  leaves = string.format('%.6f', tonumber(oldest[2]) + window)
end
return {0, stamp, used, leaves}
