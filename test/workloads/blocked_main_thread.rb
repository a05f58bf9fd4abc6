# frozen_string_literal: true

# The main thread blocks reading a pipe while a worker burns CPU, then
# writes to the pipe. The main thread must still be sampled at the rate asked.
require "json"
require "sonde"

out = ARGV.fetch(0)
rate = Integer(ARGV.fetch(1, "100"))
seconds = Float(ARGV.fetch(2, "2.0"))

def spin(seconds)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
end

reader, writer = IO.pipe
blocked_for = nil
Sonde.profile(out: out, rate: rate) do
  worker = Thread.new do
    Thread.current.name = "worker"
    spin(seconds)
    writer.write("done")
    writer.close
  end
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  reader.read
  blocked_for = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  worker.join
end
puts JSON.generate(blocked_for: blocked_for, rate: rate, stats: Sonde.stats)
