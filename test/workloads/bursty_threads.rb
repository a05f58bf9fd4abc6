# frozen_string_literal: true

# CPU charged where it is spent, measured. Three threads each loop: burn
# BURN_MS of their own CPU in `burst`, then `sleep` SLEEP_MS. At a sample a
# bursty thread is mostly asleep, so a profiler that charges each thread's
# CPU since its previous sample to the stack it has *now* puts most of it
# under Kernel#sleep. The truth, from each thread's own CPU clock: nearly
# all of their CPU is in `burst`.
#
# ARGV: out [seconds] [rate] [profiler]: profiler "sonde" (default),
# "stackprof" (cpu mode, raw), or "none": nothing profiled by the script
# itself and `out` unused (the benchmark's accuracy runs profile it from
# outside, with bench/support/profiler_hook.rb). Prints one JSON line: per
# thread, its CPU clock at the end and how much of it `burst` measured
# itself.
require "json"

out = ARGV.fetch(0)
SECONDS = Float(ARGV.fetch(1, "3.0"))
RATE = Integer(ARGV.fetch(2, "100"))
PROFILER = ARGV.fetch(3, "sonde")
THREADS = 3
BURN_MS = 3.0
SLEEP_MS = 7.0

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

def burst(seconds)
  started = thread_cpu
  x = 0
  x += 1 while thread_cpu - started < seconds
  thread_cpu - started
end

def bursty(seconds)
  deadline = monotonic + seconds
  burned = 0.0
  while monotonic < deadline
    burned += burst(BURN_MS / 1000)
    sleep(SLEEP_MS / 1000)
  end
  burned
end

def run(seconds)
  facts = {}
  lock = Mutex.new
  Array.new(THREADS) do |n|
    Thread.new do
      Thread.current.name = "bursty-#{n}"
      burned = bursty(seconds)
      lock.synchronize { facts[Thread.current.name] = { cpu: thread_cpu, burst_cpu: burned } }
    end
  end.each(&:join)
  facts
end

facts = nil
case PROFILER
when "sonde"
  require "sonde"
  Sonde.profile(out: out, rate: RATE) { facts = run(SECONDS) }
when "stackprof"
  require "stackprof"
  StackProf.run(mode: :cpu, interval: 1_000_000 / RATE, raw: true, out: out) { facts = run(SECONDS) }
when "none"
  facts = run(SECONDS)
else
  abort "bursty_threads.rb: unknown profiler #{PROFILER.inspect} (sonde, stackprof, none)"
end
puts JSON.generate(threads: facts)
