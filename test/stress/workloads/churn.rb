# frozen_string_literal: true

# Start/stop and flush churn in one process, for test/stress/churn_test.rb.
#
#   ruby churn.rb cycles COUNT WARMUP   COUNT start/stop cycles at 1000 Hz
#   ruby churn.rb flushes COUNT WARMUP  COUNT Sonde.flush calls while two
#                                       threads burn CPU and allocate
#
# Each mode first runs WARMUP cycles (or flushes) so that the allocator,
# Ruby's heap and Sonde's one-time state reach their steady size, then reads
# RSS, runs COUNT more, and reads it again. Prints one JSON line of facts.
require "json"
require "sonde"
require_relative "clock_helpers"

MODE = ARGV.fetch(0)
COUNT = Integer(ARGV.fetch(1))
WARMUP = Integer(ARGV.fetch(2))

def settled_rss_kb
  3.times { GC.start(full_mark: true, immediate_sweep: true) }
  rss_kb
end

# Stacks of varying depth, so the recorder sees many distinct stacks.
def descend(depth, &block)
  depth.zero? ? yield : descend(depth - 1, &block)
end

def allocate_some
  Array.new(50) { |i| "item #{i}" }.join.size
end

facts = { mode: MODE, count: COUNT, warmup: WARMUP, samples: 0, pprof_bytes: 0 }

case MODE
when "cycles"
  # A thread that sleeps throughout, so every cycle has a second thread to track.
  sleeper = Thread.new { sleep }
  sleeper.name = "sleeper"
  cycle = lambda do |i|
    # Every fourth cycle without signals: the idle helper's start and stop too.
    Sonde.start(rate: 1000, overhead_target: 20, signals: (i % 4 != 3))
    descend(i % 20) { spin(0.002) }
    allocate_some
    profile = Sonde.stop
    facts[:samples] += profile.stats[:samples]
    facts[:pprof_bytes] += profile.pprof.bytesize
  end
  WARMUP.times { |i| cycle.call(i) }
  facts[:rss_before_kb] = settled_rss_kb
  started = monotonic
  COUNT.times { |i| cycle.call(i) }
  facts[:seconds] = monotonic - started
  facts[:rss_after_kb] = settled_rss_kb
  facts[:threads_after] = Thread.list.size
  sleeper.kill.join
when "flushes"
  Sonde.start(rate: 1000, overhead_target: 20)
  stop = false
  workers = Array.new(2) do |w|
    Thread.new do
      Thread.current.name = "worker-#{w}"
      i = 0
      until stop
        descend(i % 40) { spin(0.001) }
        allocate_some
        sleep 0.0005 # lets the main thread in to flush: it would wait for a 100 ms GVL slice
        i += 1
      end
    end
  end
  flush = lambda do
    sleep 0.03
    profile = Sonde.flush
    facts[:pprof_bytes] += profile.pprof.bytesize
  end
  WARMUP.times { flush.call }
  facts[:rss_before_kb] = settled_rss_kb
  started = monotonic
  COUNT.times { flush.call }
  facts[:seconds] = monotonic - started
  facts[:rss_after_kb] = settled_rss_kb
  stop = true
  workers.each(&:join)
  stats = Sonde.stop.stats
  facts[:samples] = stats[:samples]
  facts[:flushes] = stats[:flushes]
else
  abort "unknown mode #{MODE}"
end

puts JSON.generate(facts)
