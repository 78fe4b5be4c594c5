# The chaos job for Ruby Sidekiq: records each run in the ledger server, like
# bench/chaos/jobs.py does for the Python libraries (same events, same format).
require "sidekiq"
require "redis-client"

Sidekiq.configure_server do |config|
  # The scheduler polls every second, as Wurk's does in the same scenarios.
  config[:poll_interval_average] = 1
end

module ChaosLedger
  def self.client
    Thread.current[:chaos_ledger] ||= RedisClient.config(url: ENV.fetch("CHAOS_LEDGER_URL")).new_client
  end

  def self.event(kind, key, attempt)
    client.call("RPUSH", "ledger:events", format("%s|%s|%d|%d|%.6f", kind, key, attempt, ::Process.pid, Time.now.to_f))
  end
end

class ChaosJob
  include Sidekiq::Job

  def perform(key, ms = 0, mode = "")
    attempt = ChaosLedger.client.call("HINCRBY", "ledger:runs", key, 1)
    ChaosLedger.event("S", key, attempt)
    Process.exit!(3) if mode == "crash" || (mode == "crash1" && attempt == 1)
    sleep(ms / 1000.0) if ms.positive?
    ChaosLedger.event("E", key, attempt)
  end
end
