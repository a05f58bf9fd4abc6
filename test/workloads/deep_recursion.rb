# frozen_string_literal: true

# A recursion DEPTH frames deep that spins at the bottom, profiled with a
# max_frames limit.
require "json"
require "sonde"

out = ARGV.fetch(0)
depth = Integer(ARGV.fetch(1, "600"))
max_frames = Integer(ARGV.fetch(2, "400"))

def dive(level, seconds)
  return spin(seconds) if level.zero?

  dive(level - 1, seconds)
end

def spin(seconds)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
end

Sonde.profile(out: out, rate: 200, max_frames: max_frames) { dive(depth, 0.5) }
puts JSON.generate(depth: depth, max_frames: max_frames, stats: Sonde.stats)
