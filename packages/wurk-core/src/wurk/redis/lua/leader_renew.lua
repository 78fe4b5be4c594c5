-- Extends the leader lock, but only for its holder.
-- KEYS[1]: `dear-leader`
-- ARGV[1]: this process's identity
-- ARGV[2]: the lock's time to live, seconds
-- Returns: 1 when renewed, 0 when the lock is someone else's or gone.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("EXPIRE", KEYS[1], tonumber(ARGV[2]))
  return 1
end
return 0
