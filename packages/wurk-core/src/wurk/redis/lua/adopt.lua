-- Checks a job that a blocking BLMOVE just claimed, by the rules fetch.lua
-- applies to suspects: an ordinary job is kept as it is; a suspect is marked
-- in this process's running set; a suspect recovered twice or more is kept
-- only when it may run alone, and otherwise given back to the tail of its
-- queue, where it was.
-- KEYS[1]: the suspects set (`super_fetch:suspects`)
-- KEYS[2]: this process's running-suspects set
-- KEYS[3]: the public queue
-- KEYS[4]: the private list holding the job
-- ARGV[1]: the job, exactly as claimed
-- ARGV[2]: "1" when this process runs nothing else
-- ARGV[3]: time to live of the running-suspects set, seconds
-- Returns: 0 (ordinary), "1:<id>" (suspect), "2:<id>" (suspect, alone), or -1 (given back).
if redis.call("SCARD", KEYS[1]) == 0 then
  return 0
end
local job = ARGV[1]
local id
local ok, parsed = pcall(cjson.decode, job)
if ok and type(parsed) == "table" and type(parsed["jid"]) == "string" then
  id = parsed["jid"]
else
  id = "sha1:" .. redis.sha1hex(job)
end
if redis.call("SISMEMBER", KEYS[1], id) == 0 then
  return 0
end
local mark = "1:" .. id
if tonumber(redis.call("GET", "super_fetch:recovered:" .. id) or "0") >= 2 then
  if ARGV[2] ~= "1" then
    if redis.call("LREM", KEYS[4], 1, job) > 0 then
      redis.call("RPUSH", KEYS[3], job)
    end
    return -1
  end
  mark = "2:" .. id
end
redis.call("SADD", KEYS[2], id)
redis.call("EXPIRE", KEYS[2], tonumber(ARGV[3]))
return mark
