-- Gives up the leader lock at a graceful shutdown, but only if we still hold it.
-- KEYS[1]: `dear-leader`
-- ARGV[1]: this process's identity
-- Returns: 1 when released, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
