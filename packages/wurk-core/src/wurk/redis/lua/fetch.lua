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
local acks = tonumber(ARGV[4])

-- Every job of one private list acknowledged at once (a batch of short jobs,
-- all finished before the next claim): the list goes with one DEL, which
-- is what removing each of them would leave, at a fraction of the calls.
local function whole_list_acknowledged()
  if acks < 2 then
    return false
  end
  local pair = ARGV[5]
  for i = 1, acks - 1 do
    if ARGV[5 + i * 3] ~= pair then
      return false
    end
  end
  local private = KEYS[tonumber(pair) * 2 + 3]
  if redis.call("LLEN", private) ~= acks then
    return false
  end
  local left = {}
  for i = 0, acks - 1 do
    local job = ARGV[6 + i * 3]
    left[job] = (left[job] or 0) + 1
  end
  for _, job in ipairs(redis.call("LRANGE", private, 0, -1)) do
    if (left[job] or 0) == 0 then
      return false
    end
    left[job] = left[job] - 1
  end
  redis.call("DEL", private)
  return true
end

local removed = whole_list_acknowledged()
for i = 0, acks - 1 do
  if not removed then
    redis.call("LREM", KEYS[tonumber(ARGV[5 + i * 3]) * 2 + 3], 1, ARGV[6 + i * 3])
  end
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
  local open = redis.call("SISMEMBER", KEYS[1], string.sub(public, 7)) == 0
  if open and not checking then
    -- No suspect anywhere: the oldest jobs move in three calls, landing in
    -- the private list in the order one move at a time would leave them.
    local jobs = redis.call("LRANGE", public, count - wanted, -1)
    if #jobs > 0 then
      redis.call("LTRIM", public, 0, -#jobs - 1)
      -- Pushed a thousand at most a call: unpack has a limit of its own.
      local moved = {}
      for i = #jobs, 1, -1 do
        moved[#moved + 1] = jobs[i]
        claimed[#claimed + 1] = pair
        claimed[#claimed + 1] = jobs[i]
        claimed[#claimed + 1] = 0
        if #moved == 1000 or i == 1 then
          redis.call("LPUSH", private, unpack(moved))
          moved = {}
        end
      end
      count = count + #jobs
    end
  elseif open then
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
