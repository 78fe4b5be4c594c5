-- Adds one minute of execution metrics (a `j|<YYMMDD>|<H>:<MM>` hash) into the
-- day totals, exactly once: a cursor holds the last minute added, and a minute
-- at or before it is refused, so two processes that both believe they lead
-- (briefly possible during a failover) cannot count a minute twice.
-- KEYS[1]: the cursor `wurk:history:rolled`
-- KEYS[2]: the one-minute hash
-- KEYS[3]: the day hash `wurk:history:jobs:<YYYYMMDD>`
-- ARGV[1]: the minute's start, epoch seconds
-- ARGV[2]: the day hash's time to live, seconds
-- Returns: the number of fields added, or -1 when the minute was already added.
local done = tonumber(redis.call("GET", KEYS[1]) or "0") or 0
local minute = tonumber(ARGV[1])
if minute <= done then
  return -1
end
local fields = redis.call("HGETALL", KEYS[2])
for index = 1, #fields, 2 do
  redis.call("HINCRBY", KEYS[3], fields[index], fields[index + 1])
end
if #fields > 0 then
  redis.call("EXPIRE", KEYS[3], tonumber(ARGV[2]))
end
redis.call("SET", KEYS[1], ARGV[1])
return #fields / 2
