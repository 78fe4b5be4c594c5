-- Moves due jobs from a sorted set (`schedule` or `retry`) onto their queues in
-- one atomic step: the push happens before the removal, so a crash can at
-- worst deliver a job twice, never lose it. The job's own top-level
-- `enqueued_at` is set to ARGV[2] where it stands, or appended as the last
-- key when it has none (as Sidekiq's client sets it on the job's hash), and
-- every other byte of the job stays as it was: re-encoding with cjson would
-- reorder the keys and respell numbers. Only the top level is touched: an
-- argument that holds an `enqueued_at` of its own, or a string that spells
-- one, goes through unchanged. A member that is not a JSON object is pushed
-- as it is, for the worker to report.
-- The destination `queue:<name>` is read from each job, so it cannot be passed
-- in KEYS; that is why this script is not for Redis Cluster.
-- KEYS[1]: the sorted set
-- KEYS[2]: the `queues` set
-- ARGV[1]: now, epoch seconds
-- ARGV[2]: now, epoch milliseconds (the new enqueued_at)
-- ARGV[3]: the most jobs to move in this call
-- Returns: how many jobs were moved.

local KEY = "enqueued_at"

-- `json` with `stamp` in place of its bytes `from` to `to` (both included).
local function spliced(json, from, to, stamp)
  return string.sub(json, 1, from - 1) .. stamp .. string.sub(json, to + 1)
end

-- Where the number after the key that ends at `key_end` starts and ends, or nil.
local function number_after(json, key_end)
  local first, after = string.match(json, '^"%s*:%s*()%-?%d[%d%.eE%+%-]*()', key_end + 1)
  if first then
    return first, after - 1
  end
end

-- The common case, without walking the job: when the text has no `\u`
-- escape, every key is spelt plainly, so the top-level key (known to be
-- there) is one of the plain occurrences of the name; when there is only
-- one, it is that one. Nil when this cannot be told so cheaply.
local function lone_stamp(json)
  if string.find(json, "\\u", 1, true) then
    return nil
  end
  local first = string.find(json, KEY, 1, true)
  if not first or string.find(json, KEY, first + #KEY, true) then
    return nil
  end
  return number_after(json, first + #KEY - 1)
end

-- The index of the quote that closes the string opened at `from`: the next
-- quote that an even number of backslashes precedes.
local function string_end(json, from)
  local quote = from
  while true do
    quote = string.find(json, '"', quote + 1, true)
    local before = quote - 1
    while string.byte(json, before) == 92 do
      before = before - 1
    end
    if (quote - 1 - before) % 2 == 0 then
      return quote
    end
  end
end

-- The index of the bracket that closes the array or object opened at `from`,
-- counting brackets and skipping strings one structural character at a time.
local function stepped_end(json, from)
  local depth, at = 0, from
  while true do
    local found = string.find(json, '[{}%[%]"]', at)
    local char = string.byte(json, found)
    at = found + 1
    if char == 34 then
      at = string_end(json, found) + 1
    elseif char == 123 or char == 91 then
      depth = depth + 1
    else
      depth = depth - 1
      if depth == 0 then
        return found
      end
    end
  end
end

-- The index of the last byte of the value that starts at `from`.
local function value_end(json, from)
  local char = string.byte(json, from)
  if char == 34 then
    return string_end(json, from)
  end
  if char == 123 or char == 91 then
    -- The balanced brackets end the value unless a string inside holds a
    -- bracket; they end it for sure when what they enclose parses alone: a
    -- shorter run than the value cannot be a whole JSON value, and a longer
    -- one has the `,` or `}` after the value in it.
    local _, balanced = string.find(json, char == 123 and "^%b{}" or "^%b[]", from)
    if balanced and pcall(cjson.decode, string.sub(json, from, balanced)) then
      return balanced
    end
    return stepped_end(json, from)
  end
  local _, last = string.find(json, "^[^,}%s]+", from) -- a number, true, false or null
  return last
end

local function is_stamp_key(key)
  if key == '"' .. KEY .. '"' then
    return true
  end
  -- A key spelt with escapes (`"enqueued\u005fat"`) names the same member.
  return string.find(key, "\\", 1, true) ~= nil and cjson.decode(key) == KEY
end

-- `json` (a JSON object) with every top-level `enqueued_at` set to `stamp`,
-- whatever its value, found by going from member to member of the top level
-- and skipping each value whole: a key inside a value is never looked at.
local function walked(json, stamp)
  local pieces, copied = {}, 1
  local at = string.find(json, "{", 1, true) + 1
  while true do
    local key = string.find(json, '["}]', at) -- past blanks: a key, or the end of `{}`
    if string.byte(json, key) == 125 then
      break
    end
    local key_end = string_end(json, key)
    local value = string.find(json, "%S", string.find(json, ":", key_end + 1, true) + 1)
    local last = value_end(json, value)
    if is_stamp_key(string.sub(json, key, key_end)) then
      table.insert(pieces, string.sub(json, copied, value - 1) .. stamp)
      copied = last + 1
    end
    local after = string.find(json, "[,}]", last + 1)
    if string.byte(json, after) == 125 then
      break
    end
    at = after + 1
  end
  table.insert(pieces, string.sub(json, copied))
  return table.concat(pieces)
end

-- `json` (valid JSON, decoded as `parsed`) stamped with `stamp`.
local function stamped(json, parsed, stamp)
  if not string.find(json, "^%s*{") then
    return json
  end
  if parsed[KEY] == nil then -- a scheduled job: the key goes last, before the closing brace
    local close = #json
    while string.byte(json, close) ~= 125 do
      close = close - 1
    end
    local comma = next(parsed) ~= nil and "," or ""
    return string.sub(json, 1, close - 1) .. comma .. '"' .. KEY .. '":' .. stamp .. string.sub(json, close)
  end
  local from, to = lone_stamp(json)
  if from then
    return spliced(json, from, to, stamp)
  end
  return walked(json, stamp)
end

local due = redis.call("ZRANGE", KEYS[1], "-inf", ARGV[1], "BYSCORE", "LIMIT", 0, tonumber(ARGV[3]))
for _, job in ipairs(due) do
  local ok, parsed = pcall(cjson.decode, job)
  local queue = "default"
  local payload = job
  if ok and type(parsed) == "table" then
    if type(parsed["queue"]) == "string" then
      queue = parsed["queue"]
    end
    local scanned, result = pcall(stamped, job, parsed, ARGV[2])
    if scanned then
      payload = result
    end
  end
  redis.call("SADD", KEYS[2], queue)
  redis.call("LPUSH", "queue:" .. queue, payload)
  redis.call("ZREM", KEYS[1], job)
end
return #due
