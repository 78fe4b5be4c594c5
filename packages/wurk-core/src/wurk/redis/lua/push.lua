-- Core's push: scheduled members into `schedule`, the rest onto their queues.
-- The call is fenced (wurk.fence): sent again after a lost reply, it finds its
-- sequence number already stored and does nothing, so no job is pushed twice.
-- KEYS[1]: the calling thread's fence, `wurk:fence:<token>`
-- KEYS[2]: `queues`
-- KEYS[3]: `schedule`
-- KEYS[4..n]: `queue:<name>` of each queue pushed to, in the order of the groups in ARGV
-- ARGV[1]: the call's sequence number; ARGV[2]: the fence's time to live, seconds
-- ARGV[3]: how many scheduled members follow (m), then m pairs of score, member
-- then per queue, in KEYS order: the queue's name, how many payloads (c), the c payloads
-- Returns: 1 when pushed, 0 when this call had been applied already.
local last = tonumber(redis.call("GET", KEYS[1]) or "0")
if last >= tonumber(ARGV[1]) then
  return 0
end
redis.call("SET", KEYS[1], ARGV[1], "EX", ARGV[2])

-- unpack() has a stack limit: a bulk push goes in slices.
local SLICE = 1000
local function send_range(command, key, first, last_index)
  for from = first, last_index, SLICE do
    redis.call(command, key, unpack(ARGV, from, math.min(from + SLICE - 1, last_index)))
  end
end

local scheduled = tonumber(ARGV[3])
if scheduled > 0 then
  send_range("ZADD", KEYS[3], 4, 3 + 2 * scheduled)
end
local cursor = 4 + 2 * scheduled
local names = {}
local groups = {}
for index = 4, #KEYS do
  local count = tonumber(ARGV[cursor + 1])
  names[#names + 1] = ARGV[cursor]
  groups[#groups + 1] = {KEYS[index], cursor + 2, cursor + 1 + count}
  cursor = cursor + 2 + count
end
if #names > 0 then
  redis.call("SADD", KEYS[2], unpack(names))
end
for _, group in ipairs(groups) do
  send_range("LPUSH", group[1], group[2], group[3])
end
return 1
