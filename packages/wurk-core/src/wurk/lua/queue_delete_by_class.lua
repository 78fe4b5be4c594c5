-- Deletes every job of one class from a queue, reading the list inside the
-- server so that a queue of any length costs the caller one round trip.
-- A job matches on its `class` or, for a wrapper job (Ruby ActiveJob, Django
-- tasks), on its `wrapped` class. A payload is a candidate when it contains the
-- literal `"class":"<name>"` or `"wrapped":"<name>"` (or the same with a space
-- after the colon, as a hand-written payload may have it); a candidate that decodes
-- as JSON must carry the name in that top-level field (so a class named inside
-- another job's arguments is not matched); one that does not decode is matched
-- on the literal alone, so a partly corrupt payload can still be removed.
-- KEYS[1]: the queue list (`queue:<name>`)
-- ARGV[1]: the class name as it appears on the wire
-- ARGV[2]: entries to read per LRANGE inside the script (bounds Lua's memory)
-- Returns: the number of payloads removed.
local name = ARGV[1]
local needles = {
  '"class":"' .. name .. '"', '"wrapped":"' .. name .. '"',
  '"class": "' .. name .. '"', '"wrapped": "' .. name .. '"',
}
local function candidate(payload)
  for _, needle in ipairs(needles) do
    if string.find(payload, needle, 1, true) then
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
      if not ok or type(job) ~= "table" or job["class"] == name or job["wrapped"] == name then
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
