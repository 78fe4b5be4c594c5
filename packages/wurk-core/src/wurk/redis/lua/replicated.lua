-- The barrier of a durable push (the `durable_push` setting): sent just before
-- a `WAIT` on the same connection, it makes sure the push is on this server
-- and gives the `WAIT` a write to wait for. A connection's `WAIT` counts the
-- replicas that hold everything up to the connection's own last write, and a
-- connection that wrote nothing yet would be answered at once; the `EXPIRE`
-- here is that write, and it comes after the push in the server's one stream.
-- A push whose fence is missing here was lost with a primary that failed
-- over before replicating it: nothing to wait for, it must be pushed again.
-- KEYS[1]: the pushing thread's fence, `wurk:fence:<token>`
-- ARGV[1]: the push's sequence number; ARGV[2]: the fence's time to live, seconds
-- Returns: 1 when the push is on this server (and the fence refreshed), 0 when it is not.
local last = tonumber(redis.call("GET", KEYS[1]) or "0")
if last < tonumber(ARGV[1]) then
  return 0
end
redis.call("EXPIRE", KEYS[1], ARGV[2])
return 1
