-- Fires complete and success for a batch, each at most once (a `SET NX`
-- marker), and pushes the fired events' callback jobs in the same step, so
-- that two workers acking the last jobs at once cannot fire twice, and a
-- worker killed halfway cannot fire without enqueueing.
--
-- complete: no live jid and no pending child. success: complete's condition,
-- pending at 0, no dead jid, and every child succeeded. When a parent waits
-- on this batch and no complete or success callback of it is left running,
-- the batch leaves the parent's pending children, and the caller looks at
-- the parent next. A marker holds the `now` of the call that set it: the same
-- call sent again after a lost reply finds its own value there and answers
-- "fired now" again (pushing nothing more), so the firing is still logged.
-- KEYS[1]: the batch hash `b-<bid>`
-- KEYS[2]: its live set `b-<bid>-jids`
-- KEYS[3]: its pending-children set `b-<bid>-pkids`
-- KEYS[4]: its died set `b-<bid>-died`
-- KEYS[5]: its failed set `b-<bid>-failed`
-- KEYS[6]: its children set `b-<bid>-kids`
-- KEYS[7]: its running-callbacks set `b-<bid>-cbs`
-- KEYS[8]: its complete marker `b-<bid>-complete`
-- KEYS[9]: its success marker `b-<bid>-success`
-- KEYS[10]: the `queues` set
-- KEYS[11]: the callback queue's list `queue:<callback_queue>`
-- KEYS[12]: the parent's pending-children set (any key when there is no parent)
-- KEYS[13..n]: the success marker of each child, as read by the caller
-- ARGV[1]: the bid
-- ARGV[2]: now, epoch seconds
-- ARGV[3]: the markers' time to live, seconds
-- ARGV[4]: the `cb-complete` field the payloads were built from ("" for none)
-- ARGV[5]: the `cb-success` field the payloads were built from
-- ARGV[6]: the callback queue's name
-- ARGV[7]: "1" when a parent waits on this batch
-- ARGV[8]: "1" to push callbacks to the end the next fetch takes from, "0" to queue them last
-- ARGV[9]: the batch's time to live once success fired, seconds
-- ARGV[10]: how many complete callbacks follow (C)
-- ARGV[11..]: jid and payload of each of the C complete callbacks, then of each success callback
-- Returns: {state, complete fired now, success fired now, parent may go on}; state is
-- 0 when the batch is gone, 1 when the callbacks or children changed since the
-- caller read them (read again), 2 when it is not finished, 3 when it was looked at.
if redis.call("EXISTS", KEYS[1]) == 0 then
  return {0, 0, 0, 0}
end
local seen = redis.call("HMGET", KEYS[1], "cb-complete", "cb-success")
if (seen[1] or "") ~= ARGV[4] or (seen[2] or "") ~= ARGV[5] then
  return {1, 0, 0, 0}
end
if redis.call("SCARD", KEYS[6]) ~= #KEYS - 12 then
  return {1, 0, 0, 0}
end
if redis.call("SCARD", KEYS[2]) > 0 or redis.call("SCARD", KEYS[3]) > 0 then
  return {2, 0, 0, 0}
end
local waits = ARGV[7] == "1"
local ttl = tonumber(ARGV[3])

local function push(first, last)
  for i = first, last, 2 do
    redis.call("SADD", KEYS[10], ARGV[6])
    if ARGV[8] == "1" then
      redis.call("RPUSH", KEYS[11], ARGV[i + 1])
    else
      redis.call("LPUSH", KEYS[11], ARGV[i + 1])
    end
    if waits then
      redis.call("SADD", KEYS[7], ARGV[i])
    end
  end
end

local complete_count = tonumber(ARGV[10])
local success_first = 11 + 2 * complete_count
local fired_complete = 0
if redis.call("SET", KEYS[8], ARGV[2], "NX", "EX", ttl) then
  fired_complete = 1
  redis.call("HSET", KEYS[1], "complete", "1", "complete_at", ARGV[2])
  push(11, success_first - 1)
elseif redis.call("GET", KEYS[8]) == ARGV[2] then
  fired_complete = 1 -- by this very call
end

local fired_success = 0
local pending = tonumber(redis.call("HGET", KEYS[1], "pending") or "0")
local succeeded = pending <= 0 and redis.call("SCARD", KEYS[4]) == 0
for i = 13, #KEYS do
  if redis.call("EXISTS", KEYS[i]) == 0 then
    succeeded = false
  end
end
if succeeded and redis.call("GET", KEYS[9]) == ARGV[2] then
  fired_success = 1 -- by this very call
elseif succeeded and redis.call("SET", KEYS[9], ARGV[2], "NX", "EX", ttl) then
  fired_success = 1
  redis.call("HSET", KEYS[1], "success_at", ARGV[2])
  push(success_first, #ARGV)
  local linger = tonumber(ARGV[9])
  for i = 1, 7 do
    redis.call("EXPIRE", KEYS[i], linger)
  end
end
if not waits then
  return {3, fired_complete, fired_success, 0}
end
if redis.call("SCARD", KEYS[7]) > 0 then
  redis.call("EXPIRE", KEYS[7], ttl, "NX")
  return {3, fired_complete, fired_success, 0}
end
redis.call("SREM", KEYS[12], ARGV[1])
return {3, fired_complete, fired_success, 1}
