# frozen_string_literal: true

# thread_starts: threads started and joined one after another, each doing a
# few microseconds of work, as a short job or a parallel map's slice does:
# what each thread's start and end cost under a profiler (issue 23), for
# bench/thread_start_cost.rb's separate processes. 1,000 threads first,
# unmeasured (the profiler past its start-up, Ruby's thread machinery
# warm), then FULL_SIZE_THREADS times the scale.
require_relative "../support/workload"

WARMUP_THREADS = 1_000
FULL_SIZE_THREADS = 5_000

def start_and_join(count)
  count.times { Thread.new { Array.new(8) { |k| k * k }.sum }.join }
end

start_and_join(WARMUP_THREADS)
SondeBench::Workload.measure("thread_starts") do
  threads = SondeBench::Workload.rounds(FULL_SIZE_THREADS)
  start_and_join(threads)
  { threads: threads, warmup_threads: WARMUP_THREADS }
end
