-- Takes the oldest signal left for a process (`<identity>-signals`, pushed at the head).
-- Fenced like core.zpopbyscore: the same call sent again after a lost reply returns the
-- signal it took instead of taking the next one, so no signal is dropped on the way.
-- KEYS[1]: the process's signal list
-- KEYS[2]: the calling thread's pop receipt, `wurk:popped:<token>` ("<seq>:<signal>")
-- ARGV[1]: the call's sequence number; ARGV[2]: the receipt's time to live, seconds
-- Returns: the signal's name, or false when none waits.
local receipt = redis.call("GET", KEYS[2])
if receipt then
  local colon = string.find(receipt, ":", 1, true)
  if tonumber(string.sub(receipt, 1, colon - 1)) >= tonumber(ARGV[1]) then
    local taken = string.sub(receipt, colon + 1)
    if taken == "" then
      return false
    end
    return taken
  end
end
local signal = redis.call("RPOP", KEYS[1])
if signal then
  redis.call("SET", KEYS[2], ARGV[1] .. ":" .. signal, "EX", ARGV[2])
end
return signal
