-- Deletes from a queue every job whose top-level field (one of ARGV[3..n])
-- holds ARGV[1]: a jid (`jid`), or a class (`class` and, for wrapper jobs such
-- as Ruby ActiveJob or Django tasks, `wrapped`). The list is read inside the
-- server, so a queue of any length costs the caller one round trip and no
-- payload crosses the network.
-- A payload is a candidate when it contains the literal `"<field>":"<value>"`
-- (or `"<field>": "<value>"`, as a hand-written payload may have it); the
-- others cost no JSON work. A candidate that decodes as JSON must carry the
-- value in one of those top-level fields, so a value quoted inside another
-- job's arguments is not matched; one that does not decode is matched on the
-- literal alone, so a partly corrupt payload can still be removed.
-- KEYS[1]: the queue list (`queue:<name>`)
-- ARGV[1]: the value to match, as it appears on the wire
-- ARGV[2]: entries to read per LRANGE inside the script (bounds Lua's memory)
-- ARGV[3..n]: the fields that may hold it
-- Returns: the number of payloads removed.
local value = ARGV[1]
local fields = {}
local needles = {}
for index = 3, #ARGV do
  fields[#fields + 1] = ARGV[index]
  needles[#needles + 1] = '"' .. ARGV[index] .. '":"' .. value .. '"'
  needles[#needles + 1] = '"' .. ARGV[index] .. '": "' .. value .. '"'
end
local function candidate(payload)
  for _, needle in ipairs(needles) do
    if string.find(payload, needle, 1, true) then
      return true
    end
  end
  return false
end
local function has_field(job)
  for _, field in ipairs(fields) do
    if job[field] == value then
      return true
    end
  end
  return false
end
local chunk = tonumber(ARGV[2])
local size = redis.call("LLEN", KEYS[1])
local doomed = {}  -- list indexes of the matches
-- A NUL byte never occurs in a JSON payload, so no job can equal this marker.
local TOMBSTONE = "\0wurk:deleted\0"
for first = 0, size - 1, chunk do
  local entries = redis.call("LRANGE", KEYS[1], first, first + chunk - 1)
  for position, payload in ipairs(entries) do
    if candidate(payload) then
      local ok, job = pcall(cjson.decode, payload)
      if not ok or type(job) ~= "table" or has_field(job) then
        doomed[#doomed + 1] = first + position - 1
      end
    end
  end
end
if #doomed == 0 then
  return 0
end
if #doomed * 32 < size then
  -- A few matches: overwrite each in place, then drop them all in one pass (one
  -- LREM per match would rescan the list once per job).
  for _, index in ipairs(doomed) do
    redis.call("LSET", KEYS[1], index, TOMBSTONE)
  end
  return redis.call("LREM", KEYS[1], 0, TOMBSTONE)
end
-- Many matches: reaching each index would cost more than one walk of the list,
-- so rotate the whole list once (tail to head keeps the order), dropping the
-- matches on the way.
local drop = {}
for _, index in ipairs(doomed) do
  drop[index] = true
end
for index = size - 1, 0, -1 do
  if drop[index] then
    redis.call("RPOP", KEYS[1])
  else
    redis.call("LMOVE", KEYS[1], KEYS[1], "RIGHT", "LEFT")
  end
end
return #doomed
