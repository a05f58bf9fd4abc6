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

# Ready once at the bottom: every thread is parked at its full depth before
# Sonde starts (ready before the descent, on a loaded machine the first
# passes met threads still descending, read every frame of each, and
# 3 or 4 passes of 14-18 ms used the whole budget).
def park(level, queue, ready)
  if level.zero?
    ready << true
    queue.pop
  else
    park(level - 1, queue, ready)
  end
end

queue = Queue.new
ready = Queue.new
threads = Array.new(threads_count) { Thread.new { park(depth, queue, ready) } }
threads_count.times { ready.pop }

Sonde.start(rate: 1000, overhead_target: target)
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
x = 0
x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < seconds
profile = Sonde.stop
threads_count.times { queue << :done }
threads.each(&:join)
puts JSON.generate(duration: profile.duration, stats: profile.stats)
