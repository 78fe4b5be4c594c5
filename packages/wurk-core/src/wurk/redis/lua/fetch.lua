-- Acknowledges finished jobs, then claims up to ARGV[1] jobs for one process:
-- each is moved atomically from the tail (oldest end) of a public queue onto
-- the head of that queue's private list, so a job is always in exactly one of
-- the two. Queues are tried in the order given (the caller shuffles for
-- weighted and random modes), and a queue in the `paused` set is skipped.
--
-- Suspects (jobs the reaper recovered from a dead process, listed in the
-- suspects set) are marked in this process's running set when claimed, so
-- that if this process dies too the reaper knows they were running (the
-- process takes the mark off once one has run for a while). A suspect
-- recovered twice or more runs alone in its process: it is claimed only as the
-- first job of a claim that ARGV[2] allows to be alone, and otherwise put back
-- where it was, ending the claim on that queue.
-- The recovery counter `super_fetch:recovered:<id>` is named from each job,
-- so it cannot be passed in KEYS.
-- KEYS[1]: the `paused` set
-- KEYS[2]: the suspects set (`super_fetch:suspects`)
-- KEYS[3]: this process's running-suspects set
-- KEYS[4..n]: pairs of (public queue, private list), e.g. queue:a, queue:a|host|pid|nonce|0
-- ARGV[1]: the most jobs to claim (0: only acknowledge)
-- ARGV[2]: "1" when this process runs nothing else, so a suspect may be claimed to run alone
-- ARGV[3]: time to live of the running-suspects set, seconds
-- ARGV[4]: how many acknowledgements follow
-- ARGV[5..]: per acknowledgement: pair index, job, suspect id ("" for an ordinary job)
-- Returns: a flat list {pair index, job, mark, ...}; mark is 0 for an ordinary
-- job, "1:<id>" for a suspect, "2:<id>" for a suspect that must run alone.
local function job_id(job)
  local ok, parsed = pcall(cjson.decode, job)
  if ok and type(parsed) == "table" and type(parsed["jid"]) == "string" then
    return parsed["jid"]
  end
  return "sha1:" .. redis.sha1hex(job)
end

local wanted = tonumber(ARGV[1])
for i = 0, tonumber(ARGV[4]) - 1 do
  local pair = tonumber(ARGV[5 + i * 3])
  redis.call("LREM", KEYS[pair * 2 + 3], 1, ARGV[6 + i * 3])
  local id = ARGV[7 + i * 3]
  if id ~= "" then
    redis.call("SREM", KEYS[3], id)
    redis.call("SREM", KEYS[2], id)
  end
end

local checking = wanted > 0 and redis.call("SCARD", KEYS[2]) > 0
local claimed = {}
local count = 0
local alone = false
for pair = 1, (#KEYS - 3) / 2 do
  if count >= wanted or alone then
    break
  end
  local public = KEYS[pair * 2 + 2]
  local private = KEYS[pair * 2 + 3]
  if redis.call("SISMEMBER", KEYS[1], string.sub(public, 7)) == 0 then
    while count < wanted do
      local job = redis.call("LMOVE", public, private, "RIGHT", "LEFT")
      if not job then
        break
      end
      local mark = 0
      if checking then
        local id = job_id(job)
        if redis.call("SISMEMBER", KEYS[2], id) == 1 then
          local recovered = tonumber(redis.call("GET", "super_fetch:recovered:" .. id) or "0")
          if recovered >= 2 then
            if count > 0 or ARGV[2] ~= "1" then
              redis.call("LMOVE", private, public, "LEFT", "RIGHT")
              break
            end
            mark = "2:" .. id
            alone = true
          else
            mark = "1:" .. id
          end
          redis.call("SADD", KEYS[3], id)
          redis.call("EXPIRE", KEYS[3], tonumber(ARGV[3]))
        end
      end
      count = count + 1
      claimed[#claimed + 1] = pair
      claimed[#claimed + 1] = job
      claimed[#claimed + 1] = mark
      if alone then
        break
      end
    end
  end
end
return claimed
