# The Ruby Sidekiq side of bench/drain.py and bench/latency.py: the same job kinds as
# the Python workers run, reporting to the harness the same way.
#
# Loaded by `sidekiq -r ./drain_app.rb` inside the Debian chroot (see
# bench/README.md). The harness copies this file to /opt/bench/ in the chroot and
# names everything else through the environment, with paths as seen inside it:
#
#   DRAIN_JOBS          the N-th finished job sends "last"
#   DRAIN_FIFO          the FIFO the "first" and "last" lines go to
#   DRAIN_COUNTER_FILE  when set (several processes), a file each finished job appends
#                       a byte to: its size is the count across processes
#   DRAIN_CPU_LOOPS     the loop count of DrainCpu1, calibrated by the harness to ~1 ms
#   DRAIN_NOLOG         when set, skip_default_job_logging (no start/done lines)
#   LATENCY_FILE        latency mode: each job appends "<start - push time, us>\n"
#
# A line is "<word> <CLOCK_MONOTONIC seconds> <pid>", the clock Python's
# time.monotonic reads, so the harness compares the two sides' moments directly.

require "sidekiq"

Sidekiq.configure_server do |config|
  config[:skip_default_job_logging] = true if ENV["DRAIN_NOLOG"]
end

module DrainMarks
  TOTAL = Integer(ENV.fetch("DRAIN_JOBS", "0"))
  FIFO = ENV.fetch("DRAIN_FIFO", "")
  COUNTER_FILE = ENV.fetch("DRAIN_COUNTER_FILE", "")
  LATENCY_FILE = ENV.fetch("LATENCY_FILE", "")
  LOCK = Mutex.new
  @started = false
  @finished = 0
  @counter = nil
  @latency = nil

  def self.send_mark(word)
    return if FIFO.empty?
    now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    File.open(FIFO, File::WRONLY | File::NONBLOCK) do |fifo|
      fifo.syswrite(format("%s %.6f %d\n", word, now, Process.pid))
    end
  end

  def self.begin_job
    return if @started
    first = LOCK.synchronize { @started ? false : (@started = true) }
    send_mark("first") if first
  end

  def self.end_job
    done = LOCK.synchronize do
      if COUNTER_FILE.empty?
        @finished += 1
      else
        @counter ||= File.open(COUNTER_FILE, File::WRONLY | File::APPEND)
        @counter.syswrite(".")
        @counter.stat.size
      end
    end
    send_mark("last") if done == TOTAL
  end

  # Latency mode: args[0] is the pusher's wall-clock time in seconds (a float).
  def self.record_latency(pushed)
    late_us = ((Time.now.to_f - pushed) * 1e6).round
    LOCK.synchronize do
      @latency ||= File.open(LATENCY_FILE, File::WRONLY | File::APPEND)
      @latency.syswrite("#{late_us}\n")
    end
  end
end

CPU_LOOPS = Integer(ENV.fetch("DRAIN_CPU_LOOPS", "20000"))

# The CPU job's work: a tight loop, as the Python job's `spin`.
def drain_spin(loops)
  total = 0
  i = 0
  while i < loops
    total += i
    i += 1
  end
  total
end

class DrainNoop
  include Sidekiq::Job
  def perform(*args)
    DrainMarks.begin_job
    DrainMarks.end_job
  end
end

class DrainIo5
  include Sidekiq::Job
  def perform(*args)
    DrainMarks.begin_job
    sleep 0.005
    DrainMarks.end_job
  end
end

class DrainCpu1
  include Sidekiq::Job
  def perform(*args)
    DrainMarks.begin_job
    drain_spin(CPU_LOOPS)
    DrainMarks.end_job
  end
end

class LatencyProbe
  include Sidekiq::Job
  def perform(pushed, *rest)
    DrainMarks.record_latency(pushed)
  end
end
