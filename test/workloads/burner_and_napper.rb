# frozen_string_literal: true

# Two threads for 2 s: "burner" spins in `burn` (CPU), "napper" sleeps in
# `nap`. Prints what they really did, measured by their own thread CPU clocks.
require "json"
require "sonde"

SECONDS = Float(ARGV.fetch(1, "2.0"))
out = ARGV.fetch(0)

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def burn(seconds)
  started = thread_cpu
  x = 0
  loop do
    10_000.times { |i| x += i * i }
    break if thread_cpu - started >= seconds
  end
  x
end

def nap(seconds)
  sleep(seconds)
end

burner_cpu = nil
napper_cpu = nil
napper_wall = nil
Sonde.profile(out: out, rate: 100) do
  burner = Thread.new do
    Thread.current.name = "burner"
    burn(SECONDS)
    burner_cpu = thread_cpu
  end
  napper = Thread.new do
    Thread.current.name = "napper"
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    nap(SECONDS)
    napper_wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    napper_cpu = thread_cpu
  end
  [burner, napper].each(&:join)
end
puts JSON.generate(burner_cpu: burner_cpu, napper_cpu: napper_cpu, napper_wall: napper_wall,
                   stats: Sonde.stats)
