-- Take a unique-job lock, or say who holds it, in one step (so a lock that
-- expires between a failed SET and a GET cannot be mistaken for a free one).
-- KEYS[1]: the lock, unique:<digest>
-- ARGV[1]: the jid taking the lock
-- ARGV[2]: the lock's TTL in whole seconds (> 0)
-- Returns: the jid that holds the lock now; ARGV[1] when it was taken here or
-- was already this jid's (a scheduled or retried job promoted back).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  return ARGV[1]
end
return redis.call('GET', KEYS[1])
