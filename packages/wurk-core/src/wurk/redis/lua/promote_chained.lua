-- Moves due jobs onto their queues after the client middleware ran on them.
-- Only the promoter holding the sorted set's promotion lock acts: two
-- promoters whose middleware answered differently for one member (one
-- passed, the other halted it on the first one's lock) can never both
-- decide its fate. The promoter read the members without removing them (a
-- crash before this call loses nothing) and chained each in Python; each
-- entry is pushed only if its member is still in the sorted set, and removed
-- in the same step. The lock's lease is renewed by each call.
-- KEYS[1]: the sorted set (`retry` or `schedule`)
-- KEYS[2]: the `queues` set
-- KEYS[3]: the sorted set's promotion lock
-- KEYS[4..n]: each entry's destination `queue:<name>`, in ARGV order
-- ARGV[1]: this promoter's lock token
-- ARGV[2]: the lock's lease, in milliseconds
-- ARGV[3i]: entry i's member, byte for byte as read from the sorted set
-- ARGV[3i+1]: entry i's queue name (added to `queues`)
-- ARGV[3i+2]: entry i's payload to push; empty when a middleware halted the
--             job or a push writer already wrote it: it is then only removed
-- Returns: how many jobs were pushed, or -1 when the lock is not ours (any
-- more), in which case nothing was done.
if redis.call("GET", KEYS[3]) ~= ARGV[1] then
  return -1
end
redis.call("PEXPIRE", KEYS[3], ARGV[2])
local pushed = 0
for i = 4, #KEYS do
  local at = (i - 4) * 3 + 2
  local member, queue, payload = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  if redis.call("ZREM", KEYS[1], member) == 1 and payload ~= "" then
    redis.call("SADD", KEYS[2], queue)
    redis.call("LPUSH", KEYS[i], payload)
    pushed = pushed + 1
  end
end
return pushed
