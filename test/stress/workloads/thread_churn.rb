# frozen_string_literal: true

# Thread churn under sampling at 1000 Hz, for test/stress/thread_churn_test.rb.
#
#   ruby thread_churn.rb COUNT [SIGNALS]
#
# A long-lived thread "busy" burns CPU the whole time while the main thread
# creates COUNT short-lived threads, BATCH at a time, and joins them. Prints
# one JSON line: how many threads ran, Sonde's count of threads with live
# state (threads_tracked) at its highest during the churn and once the churn
# is over, and how many samples "busy" got against the passes Sonde made.
require "json"
require "sonde"
require "sonde/pprof"
require_relative "clock_helpers"

COUNT = Integer(ARGV.fetch(0))
SIGNALS = ARGV.fetch(1, "signals") == "signals"
BATCH = 20
RATE = 1000

# Short lives of several kinds: some sleep, some compute, some allocate,
# some die of an exception, some are killed from outside.
def short_work(i)
  case i % 5
  when 0 then sleep(0.0002)
  when 1 then Array.new(200) { |k| k.to_s }.size
  when 2 then raise "thread #{i} dies of an exception"
  when 3 then sleep # killed by the main thread
  else 2_000.times.sum
  end
end

def finish(thread, i)
  thread.kill if i % 5 == 3
  thread.join
rescue RuntimeError
  nil
end

# The overhead budget would stretch the interval (each pass walks up to
# BATCH + 2 threads): allow its maximum, so that passes come at the rate.
Sonde.start(rate: RATE, overhead_target: 20, signals: SIGNALS)
stop = false
busy = Thread.new do
  Thread.current.name = "busy"
  x = 0
  until stop
    x += 1
    # Without this the churning main thread would wait for busy's 100 ms GVL
    # slice at every thread it starts or joins.
    Thread.pass if (x % 20_000).zero?
  end
end

started = monotonic
passes_before = Sonde.stats[:samples]
max_tracked = 0
# A thread's state is made when it starts (the thread-begin hook, with
# signals) or a pass first meets it, and freed at the first pass after it
# died. After a batch, the threads of the batches since the last pass may
# still be tracked, besides main and busy: more than that is a pile-up.
max_excess_tracked = -Float::INFINITY
batches_since_pass = 0
most_batches_without_pass = 0
passes_seen = passes_before
created = 0
while created < COUNT
  batch = Array.new([BATCH, COUNT - created].min) do |k|
    Thread.new(created + k) do |i|
      Thread.current.report_on_exception = false
      short_work(i)
    end
  end
  batch.each_with_index { |thread, k| finish(thread, created + k) }
  created += batch.size
  stats = Sonde.stats
  batches_since_pass = stats[:samples] == passes_seen ? batches_since_pass + 1 : 1
  passes_seen = stats[:samples]
  most_batches_without_pass = [most_batches_without_pass, batches_since_pass].max
  max_tracked = [max_tracked, stats[:threads_tracked]].max
  max_excess_tracked = [max_excess_tracked, stats[:threads_tracked] - (BATCH * batches_since_pass + 2)].max
end
churn_seconds = monotonic - started
passes_during_churn = Sonde.stats[:samples] - passes_before
stop = true
busy.join

# Dead threads are forgotten at the next pass: let a few run.
sleep 0.05
tracked_after = Sonde.stats[:threads_tracked]
profile = Sonde.stop
stats = profile.stats
decoded = Sonde::Pprof.decode(profile.pprof)
wall_index = decoded.value_index("wall-samples")
cpu_index = decoded.value_index("cpu-samples")
busy_samples = decoded.samples.select { |s| s.labels["thread name"] == "busy" }
thread_ids = decoded.samples.map { |s| s.labels["thread id"] }.uniq

puts JSON.generate(
  threads_created: created, churn_seconds: churn_seconds, rate: RATE, signals: SIGNALS,
  max_threads_tracked: max_tracked, max_excess_tracked: max_excess_tracked,
  most_batches_without_pass: most_batches_without_pass, threads_tracked_after: tracked_after,
  live_threads_after: Thread.list.size,
  busy_wall_samples: busy_samples.sum { |s| s.values[wall_index] },
  busy_cpu_samples: busy_samples.sum { |s| s.values[cpu_index] },
  passes: stats[:samples], passes_during_churn: passes_during_churn, profiled_thread_ids: thread_ids.size,
  pacing_delayed_ticks: stats[:pacing_delayed_ticks], signals_sent: stats[:signals_sent],
  dropped_samples: stats[:dropped_samples]
)
