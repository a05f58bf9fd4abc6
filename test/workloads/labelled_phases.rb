# frozen_string_literal: true

# CPU where it ran, by label, for a thread that may share its core. The
# main thread burns three phases of CPU, each under its own endpoint label,
# and measures each phase on its own CPU clock: the truth each label's CPU
# time in the profile is held to. The test runs it pinned to one core
# beside a busy process, where the kernel's CPU timer often goes a whole
# phase without firing (cpu_timers.h).
#
# ARGV: out [seconds per phase] [rate]. Prints one JSON line: each phase's
# CPU seconds by its label, and Sonde's stats.
require "json"
require "sonde"

out = ARGV.fetch(0)
PHASE_SECONDS = Float(ARGV.fetch(1, "0.2"))
RATE = Integer(ARGV.fetch(2, "250"))
PHASES = ["GET /users", "POST /orders", "GET /reports"].freeze

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def burn(seconds)
  started = thread_cpu
  x = 0
  x += 1 while thread_cpu - started < seconds
  x
end

Sonde.start(rate: RATE)
truth = PHASES.to_h do |endpoint|
  Sonde.with_labels(endpoint: endpoint) do
    started = thread_cpu
    burn(PHASE_SECONDS)
    [endpoint, thread_cpu - started]
  end
end
profile = Sonde.stop
profile.write(out)
stats = Sonde.stats
puts JSON.generate("phases" => truth,
                   "stats" => stats.slice(:cpu_signals, :cpu_samples_by_tick, :tick_signals, :cpu_timers))
