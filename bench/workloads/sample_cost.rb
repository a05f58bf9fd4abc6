# frozen_string_literal: true

# sample_cost: a fixed shape for measuring what one sample costs. The main
# thread spins on the CPU at a given stack depth while the other threads
# sleep at the same depth, so every sampling pass walks THREADS stacks of
# DEPTH frames. Runs for SONDE_BENCH_SECONDS (or a fixed amount of work).
#
#   SONDE_BENCH_THREADS  threads in the process, main included (default 1)
#   SONDE_BENCH_DEPTH    Ruby frames on each stack (default 30)
require_relative "../support/workload"

THREADS = Integer(ENV.fetch("SONDE_BENCH_THREADS", "1"))
DEPTH = Integer(ENV.fetch("SONDE_BENCH_DEPTH", "30"))
# Frames the recursion does not make: <main>, measure and its block on the
# main thread; a thread's block on the others.
FRAMES_ABOVE_RECURSION = 3
FULL_SIZE_SPINS = 2_000
SPIN_STEPS = 10_000

def at_depth(levels_left, &block)
  return yield if levels_left <= 0

  at_depth(levels_left - 1, &block)
end

def spin(seed)
  value = seed
  SPIN_STEPS.times { |i| value = ((value * 31) + i) % 1_000_003 }
  value
end

SondeBench::Workload.measure("sample_cost") do
  release = Queue.new
  sleepers = Array.new(THREADS - 1) do
    Thread.new { at_depth(DEPTH - FRAMES_ABOVE_RECURSION) { release.pop } }
  end
  Thread.pass until sleepers.all? { |thread| thread.status == "sleep" }
  at_depth(DEPTH - FRAMES_ABOVE_RECURSION) do
    SondeBench::Workload.each_round(FULL_SIZE_SPINS) { |n| spin(n) }
  end
  sleepers.size.times { release << :done }
  sleepers.each(&:join)
  { threads: THREADS, depth: DEPTH }
end
