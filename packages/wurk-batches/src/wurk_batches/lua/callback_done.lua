-- A child batch's complete or success callback job finished (ran, or died):
-- once none of them is left, the child leaves its parent's pending children.
-- KEYS[1]: the child's running-callbacks set `b-<bid>-cbs`
-- KEYS[2]: the parent's pending-children set `b-<parent>-pkids`
-- ARGV[1]: the callback job's jid
-- ARGV[2]: the child's bid
-- Returns: 1 when no callback of the child is left (look at the parent), else 0
redis.call("SREM", KEYS[1], ARGV[1])
if redis.call("SCARD", KEYS[1]) > 0 then
  return 0
end
redis.call("SREM", KEYS[2], ARGV[2])
return 1
