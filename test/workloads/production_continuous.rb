# frozen_string_literal: true

# Continuous mode end to end: burns CPU in `burn_cpu` for SECONDS of wall
# time, and at least until Sonde has flushed twice (every second, to the
# exporters), then exits normally, so the last period is exported by
# Sonde's exit hook.
#
#   ruby production_continuous.rb EXPORT [SECONDS]            # Sonde.start(continuous: true, every: 1, ...)
#   ruby -rsonde/auto production_continuous.rb auto [SECONDS] # configured by SONDE_* variables alone
#
# Prints one JSON line, at exit, of what really happened: the pid, the CPU
# the burn used by its own thread clock, when the burn started and ended
# (epoch ns), and Sonde's flush count once Sonde has stopped.
require "json"
require "sonde"

$stdout.sync = true
export = ARGV.fetch(0)
seconds = Float(ARGV.fetch(1, "2.5"))
facts = { pid: Process.pid }

# at_exit handlers run in reverse order: registered before Sonde.start, this
# one runs after Sonde's own (which stops Sonde and exports the last period),
# so it sees the final count of periodic flushes. Under -rsonde/auto Sonde's
# hook came first and runs last: then sonde_stopped is false.
at_exit do
  facts[:sonde_stopped] = !Sonde.running?
  facts[:flushes] = Sonde.stats[:flushes]
  puts JSON.generate(facts)
end

if export == "auto"
  facts[:running] = Sonde.running?
  facts[:configuration] = Sonde.configuration.slice(:continuous, :every, :export, :service, :env, :version, :tags)
else
  Sonde.start(continuous: true, every: 1, export: export, service: "shop", env: "test", version: "1.2.3",
              tags: { "team" => "core" })
end

def epoch_ns
  Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
end

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Spins for `seconds` of wall time, and on until Sonde has flushed `flushes`
# times (it checks every SLICE), so that the test sees periodic flushes
# however loaded the machine is; gives up after GIVE_UP seconds, when the
# flusher is not flushing at all. Returns the CPU seconds it really used.
SLICE = 0.01
GIVE_UP = 30
def burn_cpu(seconds, flushes)
  cpu_started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  started = monotonic
  x = 0
  loop do
    slice_end = monotonic + SLICE
    x += 1 while monotonic < slice_end
    elapsed = monotonic - started
    break if elapsed >= GIVE_UP || (elapsed >= seconds && Sonde.stats.fetch(:flushes, 0) >= flushes)
  end
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu_started
end

# The burn's end is its start advanced by the monotonic clock, as Sonde
# times its periods (an epoch start plus monotonic durations): the wall
# clock may be slewed meanwhile (CI once read the last period 12 ms short
# of a CLOCK_REALTIME end, in 6 runs of 6 in a row).
facts[:burn_start_ns] = epoch_ns
burn_started = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
facts[:burn_cpu] = burn_cpu(seconds, 2)
facts[:burn_end_ns] = facts[:burn_start_ns] + (Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - burn_started)
