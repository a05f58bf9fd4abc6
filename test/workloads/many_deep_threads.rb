# frozen_string_literal: true

# THREADS threads, each parked DEPTH frames deep, while the main thread
# spins: every sampling pass walks THREADS x DEPTH frames, so passes are
# expensive and the overhead budget has to slow sampling down.
require "json"
require "sonde"

threads_count = Integer(ARGV.fetch(0, "500"))
depth = Integer(ARGV.fetch(1, "300"))
seconds = Float(ARGV.fetch(2, "4"))
target = Float(ARGV.fetch(3, "1.0"))

def park(level, queue)
  level.zero? ? queue.pop : park(level - 1, queue)
end

queue = Queue.new
ready = Queue.new
threads = Array.new(threads_count) { Thread.new { ready << true; park(depth, queue) } }
threads_count.times { ready.pop }

Sonde.start(rate: 1000, overhead_target: target)
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
x = 0
x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < seconds
profile = Sonde.stop
threads_count.times { queue << :done }
threads.each(&:join)
puts JSON.generate(duration: profile.duration, stats: profile.stats)
