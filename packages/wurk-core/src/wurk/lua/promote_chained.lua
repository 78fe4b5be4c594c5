-- Moves due jobs onto their queues after the client middleware ran on them.
-- The promoter read the members without removing them (a crash before this
-- call loses nothing) and chained each in Python; here each entry is pushed
-- only if its member is still in the sorted set, and removed in the same step,
-- so of two promoters that read the same member exactly one pushes it.
-- KEYS[1]: the sorted set (`retry` or `schedule`)
-- KEYS[2]: the `queues` set
-- KEYS[3..n]: each entry's destination `queue:<name>`, in ARGV order
-- ARGV[3i-2]: entry i's member, byte for byte as read from the sorted set
-- ARGV[3i-1]: entry i's queue name (added to `queues`)
-- ARGV[3i]: entry i's payload to push; empty when a middleware halted the job,
--           which is then only removed
-- Returns: how many jobs were pushed.
local pushed = 0
for i = 3, #KEYS do
  local at = (i - 3) * 3
  local member, queue, payload = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  if redis.call("ZREM", KEYS[1], member) == 1 and payload ~= "" then
    redis.call("SADD", KEYS[2], queue)
    redis.call("LPUSH", KEYS[i], payload)
    pushed = pushed + 1
  end
end
return pushed
