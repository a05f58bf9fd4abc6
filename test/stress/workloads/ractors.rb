# frozen_string_literal: true

# Four Ractors allocating strings (and renaming their threads, listing
# threads) while the main thread allocates too, for
# test/stress/ractors_test.rb (issue 23: Sonde crashed such programs).
#
#   ruby ractors.rb SONDE RATE SOURCES COMPACT SECONDS
#     SONDE    "sonde" to profile, "control" for the same program without Sonde
#     RATE     Sonde's rate (Hz)
#     SOURCES  "cpu", "alloc" (alloc: true) or "heap" (heap: true)
#     COMPACT  "compact" to run GC.compact in the main thread now and then,
#              "flush" to also call Sonde.flush every 5 rounds in the
#              first half (while the Ractors surely run), "plain" for neither
#     SECONDS  how long the Ractors and the main thread work
#
# Prints one JSON line of facts: the process's CPU over the profiled span,
# the CPU in the profile, and Sonde's Ractor stats.
require "json"

Warning[:experimental] = false

profiled, rate, sources, compact, seconds = ARGV
rate = Integer(rate)
seconds = Float(seconds)
RACTORS = 4

def allocate_strings(count)
  kept = nil
  count.times { |i| kept = "string #{i} " * 4 }
  kept
end

if profiled == "sonde"
  require "sonde"
  options = { rate: rate }
  options[:alloc] = true if sources == "alloc"
  options[:heap] = true if sources == "heap"
  Sonde.start(**options)
end
cpu_before = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds

ractors = Array.new(RACTORS) do |n|
  Ractor.new(deadline, n) do |until_time, index|
    rounds = 0
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < until_time
      allocate_strings(2_000)
      # Thread#name= and Thread.list are Sonde's prepends (C methods that
      # read the main Ractor's state): called here, on another Ractor.
      Thread.current.name = "ractor #{index} round #{rounds}"
      Thread.list
      rounds += 1
    end
    [index, rounds]
  end
end
main_rounds = 0
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  allocate_strings(2_000)
  GC.compact if compact != "plain" && (main_rounds % 50).zero?
  # Flushes only in the first half: a Ractor ends only after the deadline,
  # so each of these flushes meets them running (a flush after they ended
  # checks the heap, which is right, and not what this mode tests).
  if compact == "flush" && profiled == "sonde" && (main_rounds % 5).zero? &&
     Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline - (seconds / 2)
    Sonde.flush
  end

  main_rounds += 1
end
ractor_rounds = ractors.map { |ractor| ractor.respond_to?(:value) ? ractor.value : ractor.take }

facts = { ruby: RUBY_VERSION, main_rounds: main_rounds, ractor_rounds: ractor_rounds.map(&:last) }
if profiled == "sonde"
  profile = Sonde.stop
  facts[:process_cpu_s] = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu_before
  decoded = profile.decode
  cpu = decoded.value_index("cpu-time")
  facts[:profile_cpu_s] = decoded.samples.sum { |sample| sample.values[cpu] } / 1e9
  facts[:comments] = decoded.comments
  facts[:stats] = Sonde.stats.select { |key, _| key.to_s.match?(/ractor|\Aalloc|\Aheap|cpu_seconds\z/) }
end
puts JSON.generate(facts)
