# frozen_string_literal: true

# Safe-point bias, measured. `crunch` is straight-line integer arithmetic
# (no calls, no loops: 40 lines of opt_plus/opt_mult/opt_minus); at its end
# it calls `trivial`, which does nothing. Ruby checks for interrupts only at
# calls, returns and backward jumps, so a profiler that reads the stack at
# the next safe point sees `trivial` (or crunch's last line) for samples that
# landed anywhere in crunch. The truth: nearly all the CPU is crunch's own.
#
# ARGV: out [seconds] [rate] [profiler]. profiler is "sonde" (default),
# "stackprof" (the peer, cpu mode, raw), or "none": the script profiles
# nothing itself and `out` is unused (the benchmark's accuracy runs profile
# it from outside, with bench/support/profiler_hook.rb). Prints one JSON
# line of facts: how many calls ran and how much CPU the thread used (its
# own clock).
require "json"

out = ARGV.fetch(0)
SECONDS = Float(ARGV.fetch(1, "2.0"))
RATE = Integer(ARGV.fetch(2, "100"))
PROFILER = ARGV.fetch(3, "sonde")

def trivial(value)
  value
end

# rubocop:disable Metrics/AbcSize, Metrics/MethodLength
def crunch(a)
  b = a * 3 + 1
  c = b * 7 - a
  d = c * 5 + b
  e = d * 3 - c
  f = e * 7 + d
  g = f * 5 - e
  h = g * 3 + f
  i = h * 7 - g
  j = i * 5 + h
  k = j * 3 - i
  l = k * 7 + j
  m = l * 5 - k
  n = m * 3 + l
  o = n * 7 - m
  p = o * 5 + n
  q = p * 3 - o
  r = q * 7 + p
  s = r * 5 - q
  t = s * 3 + r
  u = t * 7 - s
  b = u & 0xffff
  c = b * 7 - a
  d = c * 5 + b
  e = d * 3 - c
  f = e * 7 + d
  g = f * 5 - e
  h = g * 3 + f
  i = h * 7 - g
  j = i * 5 + h
  k = j * 3 - i
  l = k * 7 + j
  m = l * 5 - k
  n = m * 3 + l
  o = n * 7 - m
  p = o * 5 + n
  q = p * 3 - o
  r = q * 7 + p
  s = r * 5 - q
  t = s * 3 + r
  u = t * 7 - s
  trivial(u & 0xffff)
end
# rubocop:enable Metrics/AbcSize, Metrics/MethodLength

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def run(seconds)
  calls = 0
  started = thread_cpu
  value = 1
  until thread_cpu - started >= seconds
    2_000.times { value = crunch(value) }
    calls += 2_000
  end
  calls
end

calls = nil
profiled_cpu = nil
# The thread's CPU time while profiled (not the boot's, nor a JIT's warm-up before).
measured = lambda do
  before = thread_cpu
  calls = run(SECONDS)
  profiled_cpu = thread_cpu - before
end
case PROFILER
when "sonde"
  require "sonde"
  Sonde.profile(out: out, rate: RATE) { measured.call }
when "stackprof"
  require "stackprof"
  StackProf.run(mode: :cpu, interval: 1_000_000 / RATE, raw: true, out: out) { measured.call }
when "none"
  measured.call
else
  abort "straight_line.rb: unknown profiler #{PROFILER.inspect} (sonde, stackprof, none)"
end
first_line = method(:crunch).source_location.last
# crunch's def line, its call to trivial and its end (the last two are where
# samples pile up when the stack is read at the next safe point).
puts JSON.generate(calls: calls, cpu: profiled_cpu, crunch_first_line: first_line,
                   crunch_call_line: first_line + 41, crunch_end_line: first_line + 42)
