# frozen_string_literal: true

# many: 200 threads, most of them asleep (some in sleep, some waiting on a
# Queue), while a few do CPU work. A profiler that samples every thread pays
# for each of them on every tick; this is where that cost shows.
require_relative "../support/workload"

TOTAL_THREADS = 200
WORKERS = 4
SLEEPER_NAP_SECONDS = 0.25
FULL_SIZE_CHUNKS = 350 # per worker
CHUNK_STEPS = 10_000

def chunk(seed)
  value = seed
  CHUNK_STEPS.times { |i| value = ((value * 31) + i) % 1_000_003 }
  value
end

def nap_until(done)
  sleep(SLEEPER_NAP_SECONDS) until done.true?
end

def wait_on(queue)
  queue.pop
end

# A flag the main thread raises once the workers are done.
class Flag
  def initialize
    @raised = false
  end

  def raise!
    @raised = true
  end

  def true?
    @raised
  end
end

SondeBench::Workload.measure("many") do
  done = Flag.new
  queue = Queue.new
  sleepers = TOTAL_THREADS - WORKERS - 1
  nappers = sleepers / 2
  idle = Array.new(sleepers) do |n|
    n < nappers ? Thread.new { nap_until(done) } : Thread.new { wait_on(queue) }
  end
  workers = Array.new(WORKERS) do |w|
    Thread.new { SondeBench::Workload.each_round(FULL_SIZE_CHUNKS) { |n| chunk(n + w) } }
  end
  workers.each(&:join)
  done.raise!
  (sleepers - nappers).times { queue << :stop }
  idle.each(&:join)
  { threads: TOTAL_THREADS }
end
