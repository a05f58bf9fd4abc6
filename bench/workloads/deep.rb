# frozen_string_literal: true

# deep: one thread whose stack is 300 frames deep while it works (recursive
# descent, then a CPU-bound leaf). The cost of walking and recording a
# stack grows with depth; this shows how much.
require_relative "../support/workload"

STACK_DEPTH = 300
FRAMES_ABOVE_RECURSION = 5 # <main>, measure, each_round and their blocks
FULL_SIZE_DESCENTS = 900
LEAF_STEPS = 20_000

def descend(levels_left, seed)
  return leaf(seed) if levels_left.zero?

  descend(levels_left - 1, seed)
end

def leaf(seed)
  value = seed
  LEAF_STEPS.times { |i| value = ((value * 31) + i) % 1_000_003 }
  value
end

SondeBench::Workload.measure("deep") do
  total = 0
  SondeBench::Workload.each_round(FULL_SIZE_DESCENTS) do |n|
    total += descend(STACK_DEPTH - FRAMES_ABOVE_RECURSION, n)
  end
  { threads: 1, stack_depth: STACK_DEPTH, total: total }
end
