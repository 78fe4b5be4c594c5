-- Count one job outcome and keep it among the most recent ones, atomically.
-- KEYS[1]: the counts hash (field: outcome kind)
-- KEYS[2]: the recent-outcomes list (newest first)
-- ARGV[1]: the outcome kind
-- ARGV[2]: the entry to remember (JSON)
-- ARGV[3]: how many entries to keep
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
return redis.call('HGET', KEYS[1], ARGV[1])
