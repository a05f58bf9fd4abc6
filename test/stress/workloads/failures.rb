# frozen_string_literal: true

# Failures inside the profiler, for test/stress/failures_test.rb. Prints one
# JSON line of facts.
#
#   ruby failures.rb forced SIGNALS        a sampling pass fails (test hook)
#                                          while four threads compute; SIGNALS
#                                          is "signals" or "nosignals" (the
#                                          failing pass then runs on the idle
#                                          helper)
#   ruby failures.rb forced_continuous DIR the same in continuous mode
#                                          (every: 1, dir:DIR); the process
#                                          then exits without Sonde.stop
#   ruby failures.rb failure_churn COUNT   COUNT start/fail/stop cycles: RSS
#                                          before and after
#   ruby failures.rb throughput SECONDS [EXPORT]  a CPU loop for SECONDS,
#                                          without Sonde, or in continuous
#                                          mode (every: 1) exporting to EXPORT;
#                                          ops/s and the exporters' stats
require "json"
require "sonde"
require_relative "clock_helpers"

# Deterministic work with a known answer: the sum of i*i mod 7919 for i < n.
def compute(n)
  sum = 0
  n.times { |i| sum += (i * i) % 7919 }
  sum
end

def expected(n)
  full, rest = n.divmod(7919)
  per_cycle = (0...7919).sum { |i| (i * i) % 7919 }
  full * per_cycle + (0...rest).sum { |i| (i * i) % 7919 }
end

WORK = 1_500_000

# Four threads compute (and one sleeps) while the next pass is made to fail.
def app_under_failure
  threads = Array.new(4) { |k| Thread.new { compute(WORK + k) } }
  sleeper = Thread.new { sleep 0.3 }
  sleep 0.05
  Sonde::Native::Testing.fail_next_sample
  results = threads.map(&:value)
  sleeper.join
  results.each_with_index.all? { |value, k| value == expected(WORK + k) }
end

def stop_and_report(facts)
  Sonde.stop
  facts[:stop] = "returned"
rescue Sonde::SamplingError => e
  facts[:stop] = "raised"
  facts[:message] = e.message
  facts[:cause] = e.cause.class.name
  facts[:partial_profile_bytes] = e.profile.pprof.bytesize
  facts[:partial_samples] = e.profile.stats[:samples]
end

facts = { mode: ARGV[0] }
case ARGV.fetch(0)
when "forced"
  Sonde.start(rate: 1000, signals: ARGV.fetch(1) == "signals")
  facts[:results_correct] = app_under_failure
  facts[:running_after_failure] = Sonde.running?
  facts[:failure_seen] = Sonde::Native.failure.class.name
  stop_and_report(facts)
  # A new run works after a failure.
  # Computing for 0.2 s, not a fixed amount of work: 100,000 steps took
  # 10 ms, and a CI run whose machine stalled that long saw no pass.
  Sonde.start(rate: 1000)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.2
  compute(10_000) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  facts[:restart_samples] = Sonde.stop.stats[:samples]
when "forced_continuous"
  Sonde.start(rate: 1000, continuous: true, every: 1, export: "dir:#{ARGV.fetch(1)}", service: "failing")
  facts[:results_correct] = app_under_failure
  facts[:running_after_failure] = Sonde.running?
  sleep 1.5 # the flusher flushes a stopped profiler: must not raise into anything
  facts[:exit] = "without Sonde.stop"
when "failure_churn"
  count = Integer(ARGV.fetch(1))
  cycle = lambda do
    Sonde.start(rate: 1000)
    Sonde::Native::Testing.fail_next_sample
    deadline = monotonic + 0.02
    compute(1000) while Sonde.running? && monotonic < deadline
    begin
      Sonde.stop
      :returned
    rescue Sonde::SamplingError
      :raised
    end
  end
  $stderr.reopen(File::NULL) # every failure prints its warning
  50.times { cycle.call } # Ruby's heap and malloc's arenas grow to their steady size first
  3.times { GC.start }
  facts[:rss_before_kb] = rss_kb
  started = monotonic
  outcomes = Array.new(count) { cycle.call }
  facts[:seconds] = monotonic - started
  3.times { GC.start }
  facts[:rss_after_kb] = rss_kb
  facts[:outcomes] = outcomes.tally
when "throughput"
  seconds = Float(ARGV.fetch(1))
  export = ARGV[2]
  continuous = nil
  if export
    Sonde.start(continuous: true, every: 1, export: export, service: "down")
    continuous = Sonde.session.continuous # the flusher's counts are internal
  end
  ops = 0
  started = monotonic
  cpu_started = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  deadline = started + seconds
  # Until the flusher has run once too (every: 1), however late a loaded
  # machine lets its thread in, 10 s at most: a run that ends first tells
  # nothing of what a dead target costs a flush.
  flushed_or_late = -> { continuous.nil? || continuous.flushes >= 1 || monotonic > deadline + 10 }
  ops += compute(1000).zero? ? 0 : 1 while monotonic < deadline || !flushed_or_late.call
  facts[:ops_per_second] = ops / (monotonic - started)
  facts[:cpu_seconds] = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu_started
  # Per second of this process's CPU time (all its threads): what Sonde and
  # its exporters take shows; other processes on a shared machine do not.
  facts[:ops_per_cpu_second] = ops / facts[:cpu_seconds]
  if continuous
    facts[:flushes] = continuous.flushes
    facts[:flush_errors] = continuous.errors
    facts[:exporters_before_stop] = Sonde.stats.fetch(:exporters).map { |e| [e[:kind], e] }
    stop_started = monotonic
    Sonde.stop
    facts[:stop_seconds] = monotonic - stop_started
    facts[:exporters_after_stop] = Sonde.stats.fetch(:exporters).map { |e| [e[:kind], e] }
  end
else
  abort "unknown mode #{ARGV[0]}"
end
puts JSON.generate(facts)
