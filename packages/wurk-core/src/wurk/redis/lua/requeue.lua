-- Gives unfinished jobs back to their public queue at shutdown. Each job is
-- removed from the private list first and pushed only if it was still there,
-- so a job a processor acknowledged in the meantime is never resurrected. The
-- push goes to the tail, which is where the next fetch takes from.
-- KEYS[1]: the private list
-- KEYS[2]: the public queue
-- ARGV[1..n]: the jobs, exactly as fetched
-- Returns: how many jobs were requeued.
local moved = 0
for i = 1, #ARGV do
  if redis.call("LREM", KEYS[1], 1, ARGV[i]) > 0 then
    redis.call("RPUSH", KEYS[2], ARGV[i])
    moved = moved + 1
  end
end
return moved
