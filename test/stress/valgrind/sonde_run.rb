# frozen_string_literal: true

# The Ruby program test/stress/valgrind_test.rb runs under valgrind: Sonde at
# 1000 Hz over a few threads (CPU, sleep, pipe IO, a Queue), two flushes, a
# stop, then a second short run without signals, then a third sampling
# allocations and the live heap (a small interval, objects kept and freed,
# a GC.compact, a flush). Kept short: under
# memcheck Ruby runs some 30 times slower. Prints one line "ok ...".
require "sonde"

def spin(iterations)
  x = 0
  iterations.times { |i| x += i }
  x
end

def run_threads
  queue = Queue.new
  reader, writer = IO.pipe
  threads = [
    Thread.new { Thread.current.name = "cpu"; spin(60_000) },
    Thread.new { Thread.current.name = "sleeper"; 3.times { sleep 0.02 } },
    Thread.new { Thread.current.name = "reader"; reader.read(5) },
    Thread.new { Thread.current.name = "queue"; queue.pop },
  ]
  spin(20_000)
  writer.write("hello")
  queue << :go
  threads.each(&:join)
ensure
  reader&.close
  writer&.close
end

Sonde.start(rate: 1000, overhead_target: 20)
run_threads
first = Sonde.flush
run_threads
second = Sonde.flush
spin(10_000)
last = Sonde.stop
samples = [first, second, last].sum { |profile| profile.decode.samples.size }

Sonde.start(rate: 1000, signals: false, overhead_target: 20)
run_threads
quiet = Sonde.stop
ticks = Sonde.stats[:samples]

Sonde.start(rate: 1000, overhead_target: 20, heap: true, alloc_interval: 16)
kept = Array.new(2_000) { |i| "kept #{i}" }
run_threads
GC.start
with_heap = Sonde.flush
kept.clear
GC.compact if GC.respond_to?(:compact)
Array.new(1_000) { |i| "after #{i}" }
GC.start
heap_stats = Sonde.stats
heap_last = Sonde.stop
live = [with_heap, heap_last].sum do |profile|
  decoded = profile.decode
  index = decoded.value_index("heap-live-samples")
  decoded.samples.sum { |sample| sample.values[index] }
end
puts "ok samples=#{samples} no_signals_samples=#{quiet.decode.samples.size} ticks=#{ticks} " \
     "alloc_samples=#{heap_stats[:alloc_samples]} heap_live=#{live}"
