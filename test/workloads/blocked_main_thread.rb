# frozen_string_literal: true

# The main thread blocks reading a pipe while a worker burns CPU, then
# writes to the pipe. The main thread must still be sampled at the rate asked.
require "json"
require "sonde"

out = ARGV.fetch(0)
rate = Integer(ARGV.fetch(1, "100"))
seconds = Float(ARGV.fetch(2, "2.0"))

# Burns the CPU holding the GVL for seconds; returns the seconds the
# thread did not run meanwhile (gaps of over 2 ms between two readings of
# the clock: the host stole the CPU). No pass can sample anyone then, since
# a pass needs the GVL this thread holds: the test expects no ticks of it.
STALL_GAP = 0.002

def spin(seconds)
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  deadline = now + seconds
  stalled = 0.0
  while now < deadline
    before = now
    now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    stalled += now - before if now - before > STALL_GAP
  end
  stalled
end

reader, writer = IO.pipe
blocked_for = nil
stalled = nil
Sonde.profile(out: out, rate: rate) do
  worker = Thread.new do
    Thread.current.name = "worker"
    stalled = spin(seconds)
    writer.write("done")
    writer.close
  end
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  reader.read
  blocked_for = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  worker.join
end
puts JSON.generate(blocked_for: blocked_for, stalled: stalled, rate: rate, stats: Sonde.stats)
