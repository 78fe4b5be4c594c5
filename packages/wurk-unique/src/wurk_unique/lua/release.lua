-- Release a unique-job lock only if it is still this job's: a late retry must
-- not free a lock a later push of the same job took after the first expired.
-- KEYS[1]: the lock, unique:<digest>
-- ARGV[1]: the jid releasing it
-- Returns: 1 when the lock was deleted, 0 when it was absent or another jid's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
