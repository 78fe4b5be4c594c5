-- Claims up to ARGV[1] jobs for one process: each is moved atomically from the
-- tail (oldest end) of a public queue onto the head of that queue's private
-- list, so a job is always in exactly one of the two. Queues are tried in the
-- order given (the caller shuffles for weighted and random modes), and a queue
-- in the `paused` set is skipped.
-- KEYS[1]: the `paused` set
-- KEYS[2..n]: pairs of (public queue, private list), e.g. queue:a, queue:a|host|pid|nonce|0
-- ARGV[1]: the most jobs to claim
-- Returns: a flat list {pair index, job, pair index, job, ...}; empty when every queue is empty.
local wanted = tonumber(ARGV[1])
local claimed = {}
local count = 0
for pair = 1, (#KEYS - 1) / 2 do
  local public = KEYS[pair * 2]
  local private = KEYS[pair * 2 + 1]
  if redis.call("SISMEMBER", KEYS[1], string.sub(public, 7)) == 0 then
    while count < wanted do
      local job = redis.call("LMOVE", public, private, "RIGHT", "LEFT")
      if not job then
        break
      end
      count = count + 1
      claimed[#claimed + 1] = pair
      claimed[#claimed + 1] = job
    end
  end
  if count >= wanted then
    break
  end
end
return claimed
