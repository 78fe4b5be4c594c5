-- Takes the leader lock from a holder known to be dead (its host saw its
-- process gone), but only if that holder still has it: a live successor that
-- took it meanwhile keeps it. Sent again after a lost reply, it finds the
-- lock already ours and says so.
-- KEYS[1]: `dear-leader`
-- ARGV[1]: the dead holder's identity
-- ARGV[2]: this process's identity
-- ARGV[3]: the lease, seconds
-- Returns: 1 when the lock is ours, 0 otherwise.
local holder = redis.call("GET", KEYS[1])
if holder == ARGV[2] then
  return 1
end
if holder == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[2], "EX", tonumber(ARGV[3]))
  return 1
end
return 0
