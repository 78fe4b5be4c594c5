-- Take one slot of a concurrent limiter if one is free, at Redis TIME.
-- Slots outlive a crashed holder by at most lock_timeout: expired ones are
-- evicted first and counted as reclaimed. The slot token is the call's own
-- (the same on every sending of one call): sent again after a lost reply, the
-- call finds the slot it took and answers admitted, instead of taking a second
-- slot that nobody would give back before its lease ran out.
-- KEYS[1]: the held slots (ZSET lmtr-cs:<name>, score = expiry epoch)
-- KEYS[2]: the metric counters (HASH lmtr-stats:<name>)
-- KEYS[3]: the limiter's metadata (HASH lmtr:<name>), whose TTL is refreshed
-- ARGV[1]: the limit (slots)
-- ARGV[2]: lock_timeout, seconds
-- ARGV[3]: ttl of every key, seconds
-- ARGV[4]: this acquisition's slot token, unique to the call
-- ARGV[5]: server time of this caller's first refused attempt, or "" if none
-- Returns {1, now, used} when admitted, {0, now, used, soonest expiry} when not.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[3])
local reclaimed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if reclaimed > 0 then
  redis.call('HINCRBY', KEYS[2], 'reclaimed', reclaimed)
end
local used = redis.call('ZCARD', KEYS[1])
local stamp = string.format('%.6f', now)
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  return {1, stamp, used} -- taken by this very call
end
if used < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[4])
  if ARGV[5] == '' then
    redis.call('HINCRBY', KEYS[2], 'immediate', 1)
  else
    redis.call('HINCRBY', KEYS[2], 'waited', 1)
    redis.call('HINCRBYFLOAT', KEYS[2], 'wait_time', string.format('%.6f', now - tonumber(ARGV[5])))
  end
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('EXPIRE', KEYS[3], ttl)
  return {1, stamp, used + 1}
end
redis.call('EXPIRE', KEYS[2], ttl)
local soonest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, stamp, used, soonest[2]}
