-- Moves due jobs from a sorted set (`schedule` or `retry`) onto their queues in
-- one atomic step: the push happens before the removal, so a crash can at
-- worst deliver a job twice, never lose it. `enqueued_at` is set to ARGV[2] in
-- place (or appended), leaving every other byte of the job as it was.
-- The destination `queue:<name>` is read from each job, so it cannot be passed
-- in KEYS; that is why this script is not for Redis Cluster.
-- KEYS[1]: the sorted set
-- KEYS[2]: the `queues` set
-- ARGV[1]: now, epoch seconds
-- ARGV[2]: now, epoch milliseconds (the new enqueued_at)
-- ARGV[3]: the most jobs to move in this call
-- Returns: how many jobs were moved.
local due = redis.call("ZRANGE", KEYS[1], "-inf", ARGV[1], "BYSCORE", "LIMIT", 0, tonumber(ARGV[3]))
for _, job in ipairs(due) do
  local ok, parsed = pcall(cjson.decode, job)
  local queue = "default"
  if ok and type(parsed) == "table" and type(parsed["queue"]) == "string" then
    queue = parsed["queue"]
  end
  local stamped, found = string.gsub(job, '"enqueued_at":[%d%.eE%+%-]+', '"enqueued_at":' .. ARGV[2], 1)
  if found == 0 and string.sub(job, -1) == "}" then
    stamped = string.sub(job, 1, -2) .. ',"enqueued_at":' .. ARGV[2] .. "}"
  end
  redis.call("SADD", KEYS[2], queue)
  redis.call("LPUSH", "queue:" .. queue, stamped)
  redis.call("ZREM", KEYS[1], job)
end
return #due
