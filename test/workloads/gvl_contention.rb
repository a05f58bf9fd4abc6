# frozen_string_literal: true

# Four threads burn CPU at once for about 2 s of wall time each. One GVL:
# only one of them runs Ruby at a time, so each spends about 3/4 of its wall
# time ready to run but queued for the GVL. Prints what each thread really
# did: its CPU (its own thread clock) and wall time since Thread.new (a new
# thread first queues for the GVL too: that wait is part of its life), and
# the profile's path.
require "json"
require "sonde"

out = ARGV.fetch(0)
SECONDS = Float(ARGV.fetch(1, "2.0"))
THREADS = 4

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

def contend(seconds)
  started = monotonic
  x = 0
  x += 1 while monotonic - started < seconds
  x
end

facts = {}
Sonde.profile(out: out, rate: 100) do
  threads = Array.new(THREADS) do |i|
    started = monotonic
    Thread.new do
      Thread.current.name = "contender-#{i}"
      contend(SECONDS)
      facts[Thread.current.name] = { cpu: Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID),
                                     wall: monotonic - started }
    end
  end
  threads.each(&:join)
end
puts JSON.generate(threads: facts, stats: Sonde.stats)
