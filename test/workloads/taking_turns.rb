# frozen_string_literal: true

# Two threads take turns: A burns for 0.5 s while B waits, then B burns
# while A waits, three times each; then both burn at once for 0.6 s (the
# GVL lets one run at a time). Usage: taking_turns.rb OUT [OPTIONS_JSON];
# writes the profile to OUT and prints one JSON line: each turn's thread,
# edges and the CPU time its thread got in it, and the contended phase's edges (epoch nanoseconds, the clock the
# profile's timestamps are on), and Sonde's timeline stats.
require "json"
require "sonde"

# Edges are read on CLOCK_MONOTONIC, the clock Sonde times samples with,
# and put on the epoch as Sonde puts its samples: by the offset between the
# two clocks at the start (set below, right after Sonde.start). Read on
# CLOCK_REALTIME, the edges moved when the system clock did and the
# samples did not: in one CI run, on 3.3 and 3.4, a first turn began 20 ms
# after the start although the main thread sleeps 50 ms before it, and A's
# contended samples came 5-13 ms before the main thread let A go.
$epoch_offset_ns = 0
def epoch_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) + $epoch_offset_ns
def thread_cpu_ns = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)

def spin_for(seconds)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
end

# One method per thread, so that a sample's stack says whose burn it is.
def burn_in_a(seconds) = spin_for(seconds)
def burn_in_b(seconds) = spin_for(seconds)

# A thread that burns in its turns (each handed to it on mine, handed on
# to the other on theirs), then once more beside the other.
def taking_turns(name, mine, theirs, turns, together, &burn)
  Thread.new do
    Thread.current.name = name
    3.times do
      mine.pop
      started = epoch_ns
      cpu = thread_cpu_ns
      burn.call(0.5)
      turns << [name, started, epoch_ns, thread_cpu_ns - cpu]
      theirs << true
    end
    together.pop
    burn.call(0.6)
  end
end

out, options = ARGV
Sonde.start(**JSON.parse(options || "{}", symbolize_names: true))
$epoch_offset_ns = Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond) -
                   Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
turns = Queue.new
a_turn = Queue.new
b_turn = Queue.new
together = Queue.new
a = taking_turns("A", a_turn, b_turn, turns, together) { |seconds| burn_in_a(seconds) }
b = taking_turns("B", b_turn, a_turn, turns, together) { |seconds| burn_in_b(seconds) }
sleep 0.05 # both threads are met, waiting, before the first turn
a_turn << true
# Blocking, not polling: a main thread that woke every 10 ms to look took
# the GVL from the burning thread, which then truly waited for it (seen
# as "waiting for GVL" in its own turn on a loaded machine, 2 runs in 10).
finished_turns = Array.new(6) { turns.pop }
contended_start = epoch_ns
2.times { together << true }
[a, b].each(&:join)
contended_end = epoch_ns
profile = Sonde.stop
File.binwrite(out, profile.pprof)
stats = profile.stats
puts JSON.generate("turns" => finished_turns, "contended" => [contended_start, contended_end],
                   "timeline_samples" => stats[:timeline_samples], "timeline_dropped" => stats[:timeline_dropped])
