-- Charge a bucket limiter's counter for the current period, at Redis TIME.
-- The counter's key names its period, which only Redis's clock can tell; the
-- caller passes the key of the period it believes current, and when Redis's
-- clock disagrees nothing is written and the right period is returned, so
-- that the caller retries with that key (every key stays in KEYS).
-- An admission is fenced (wurk.fence): the same call sent again after a lost
-- reply answers admitted without charging again (a refusal writes no charge,
-- so it is simply decided again).
-- KEYS[1]: the counter of one period (STRING lmtr-b:<name>:<epoch>)
-- KEYS[2]: the limiter's metadata (HASH lmtr:<name>), whose TTL is refreshed
-- KEYS[3]: the calling thread's fence, `wurk:fence:<token>`
-- ARGV[1]: count allowed per period
-- ARGV[2]: period length, seconds
-- ARGV[3]: ttl of every key, seconds
-- ARGV[4]: units to charge (admitted only if all of them fit)
-- ARGV[5]: the epoch (now // period) that KEYS[1] belongs to
-- ARGV[6]: the call's sequence number; ARGV[7]: the fence's time to live, seconds
-- Returns {1, now, used, next boundary} when admitted, {0, now, used, next
-- boundary} when refused, {-1, now, the current epoch} on a stale key.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local period = tonumber(ARGV[2])
local epoch = math.floor(now / period)
local stamp = string.format('%.6f', now)
if tonumber(redis.call('GET', KEYS[3]) or '0') >= tonumber(ARGV[6]) then
  -- admitted by this very call, perhaps in the period before
  local boundary = string.format('%.6f', (tonumber(ARGV[5]) + 1) * period)
  return {1, stamp, tonumber(redis.call('GET', KEYS[1]) or '0'), boundary}
end
if epoch ~= tonumber(ARGV[5]) then
  return {-1, stamp, string.format('%d', epoch)}
end
local boundary = string.format('%.6f', (epoch + 1) * period)
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local charge = tonumber(ARGV[4])
local ttl = tonumber(ARGV[3])
redis.call('EXPIRE', KEYS[2], ttl)
if used + charge <= tonumber(ARGV[1]) then
  used = redis.call('INCRBY', KEYS[1], charge)
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('SET', KEYS[3], ARGV[6], 'EX', ARGV[7])
  return {1, stamp, used, boundary}
end
return {0, stamp, used, boundary}
