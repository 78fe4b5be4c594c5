-- Spend or settle a points limiter's balance, at Redis TIME. The balance
-- refills continuously at refill_per_second since the last call and is kept
-- within [0, initial_points]. A spend that succeeded and every settlement are
-- fenced (wurk.fence): the same call sent again after a lost reply answers as
-- the first did without spending or refunding a second time.
-- KEYS[1]: the balance (HASH lmtr-p:<name>: points, last)
-- KEYS[2]: the limiter's metadata (HASH lmtr:<name>), whose TTL is refreshed
-- KEYS[3]: the calling thread's fence, `wurk:fence:<token>`
-- ARGV[1]: initial_points (the cap; a new balance starts full)
-- ARGV[2]: refill_per_second
-- ARGV[3]: ttl of every key, seconds
-- ARGV[4]: "spend" (take ARGV[5] if the balance holds it) or "settle" (add
--          ARGV[5], which may be negative: a refund or an extra charge)
-- ARGV[5]: the amount
-- ARGV[6]: the call's sequence number; ARGV[7]: the fence's time to live, seconds
-- Returns {1, now, balance} when spent or settled, {0, now, balance, when the
-- balance will hold the amount (or "" if it never refills)} when refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cap = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local amount = tonumber(ARGV[5])
local state = redis.call('HMGET', KEYS[1], 'points', 'last')
local points = tonumber(state[1] or ARGV[1])
local last = tonumber(state[2] or tostring(now))
if now > last then
  points = math.min(cap, points + (now - last) * refill)
end
local stamp = string.format('%.6f', now)
if tonumber(redis.call('GET', KEYS[3]) or '0') >= tonumber(ARGV[6]) then
  return {1, stamp, string.format('%.17g', points)} -- spent or settled by this very call
end
local ok = 1
if ARGV[4] == 'spend' then
  if points >= amount then
    points = points - amount
  else
    ok = 0
  end
else
  points = math.max(0, math.min(cap, points + amount))
end
if ok == 1 then
  redis.call('SET', KEYS[3], ARGV[6], 'EX', ARGV[7])
end
redis.call('HSET', KEYS[1], 'points', string.format('%.17g', points), 'last', string.format('%.6f', math.max(now, last)))
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
if ok == 1 then
  return {1, stamp, string.format('%.17g', points)}
end
local ready = ''
if refill > 0 and amount <= cap then
  ready = string.format('%.6f', now + (amount - points) / refill)
end
return {0, stamp, string.format('%.17g', points), ready}
