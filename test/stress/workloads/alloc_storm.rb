# frozen_string_literal: true

# Allocation and heap sampling under everything at once, for
# test/stress/alloc_storm_test.rb.
#
#   ruby alloc_storm.rb storm SECONDS   heap: true at a tiny interval (4) and
#       CPU sampling at 1000 Hz (so the allocation hook goes on and off up to
#       100 times a second: one tick in 20 listened to), while threads are born and die allocating,
#       children are forked (and allocate, and exit), the main thread flushes
#       every 50 ms and runs GC.start and GC.compact now and then.
#   ruby alloc_storm.rb cap COUNT       heap: true at interval 1, listening all the time, with COUNT
#       objects kept alive (more than the tracked set holds): the set fills,
#       the rest is counted, RSS stays bounded; repeated 3 times.
#
# Prints one JSON line of facts.
require "json"
require "sonde"
require_relative "clock_helpers"

MODE = ARGV.fetch(0)
facts = { mode: MODE }

# Every 16th hash outlives its call, in a bounded ring shared by all threads:
# the tracked set then holds live objects whenever GC.compact runs (with
# only garbage in it, a compaction has nothing to reset and the storm would
# not exercise the reset).
RETAINED = []
RETAINED_LOCK = Mutex.new
RETAINED_MAX = 4_000

def allocate_some(n)
  Array.new(n) do |i|
    hash = { i => "value #{i}" }
    if (i % 16).zero?
      RETAINED_LOCK.synchronize do
        RETAINED << hash
        RETAINED.shift if RETAINED.size > RETAINED_MAX
      end
    end
    hash
  end.size
end

case MODE
when "storm"
  seconds = Float(ARGV.fetch(1))
  Sonde.start(rate: 1000, overhead_target: 20, heap: true, alloc_interval: 4)
  stop = false
  churners = Array.new(3) do |n|
    Thread.new do
      Thread.current.name = "churner-#{n}"
      born = 0
      until stop
        Array.new(5) { Thread.new { allocate_some(300); Thread.current.kill if born.odd? } }.each(&:join)
        born += 5
      end
      born
    end
  end
  forks = []
  flushes = 0
  samples_in_flushes = 0
  deadline = monotonic + seconds
  i = 0
  while monotonic < deadline
    allocate_some(500)
    profile = Sonde.flush
    flushes += 1
    samples_in_flushes += profile.stats[:alloc_samples]
    if (i % 10).zero?
      forks << fork do
        allocate_some(2_000) # the child runs with the hooks the parent had, until its fork hook stops the run
        Sonde.start(heap: true, alloc_interval: 8) unless Sonde.running?
        allocate_some(2_000)
        Sonde.stop
        exit!(0)
      end
    end
    GC.start if (i % 7).zero?
    GC.compact if (i % 23).zero? && GC.respond_to?(:compact)
    i += 1
    sleep 0.05
  end
  stop = true
  facts[:threads_born] = churners.sum(&:value)
  facts[:children_ok] = forks.count { |pid| Process.wait2(pid).last.success? }
  facts[:children] = forks.size
  facts[:flushes] = flushes
  stats = Sonde.stats
  last = Sonde.stop
  facts[:stats] = stats
  facts[:last_pprof_bytes] = last.pprof.bytesize
when "cap"
  count = Integer(ARGV.fetch(1))
  rss = []
  3.times do
    Sonde.start(heap: true, alloc_interval: 1, alloc_duty: 1)
    kept = Array.new(count) { Object.new }
    stats = Sonde.stats
    profile = Sonde.stop
    # The stop's check of the live heap forgets tracked objects that died
    # (a few of the first ones tracked are temporaries): what it kept is
    # what the profile holds.
    facts[:tracked_at_stop] = Sonde.stats[:heap_tracked_objects]
    facts[:tracked] = stats[:heap_tracked_objects]
    facts[:capacity] = stats[:heap_tracker_capacity]
    facts[:dropped] = stats[:heap_dropped_objects]
    decoded = profile.decode
    index = decoded.value_index("heap-live-samples")
    facts[:live_in_profile] = decoded.samples.sum { |sample| sample.values[index] }
    kept = nil
    GC.start
    rss << rss_kb
  end
  facts[:rss_kb] = rss
end
puts JSON.generate(facts)
