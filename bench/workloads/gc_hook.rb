# frozen_string_literal: true

# gc_hook: what Sonde's GC accounting costs an allocation. On Ruby 3.1/3.2,
# while any GC event hook is on, gc.c takes its allocation slow path for
# every object (Sonde polls GC.total_time there instead of hooking), so a
# profiler that hooks GC slows down all allocation, not only GC. Measured in
# one process, with Sonde started and stopped around each step, in shuffled
# rounds: no Sonde, Sonde with gc: false, Sonde with gc: true (the default).
# Each step is timed on the main thread's CPU clock (Sonde's own threads and
# the machine's other tenants are not in it) and the minimum over rounds is
# kept, so the comparison holds on a noisy machine. A compute step that
# allocates nothing is the control.
require_relative "../support/workload"
require "sonde"

FULL_SIZE_ROUNDS = 100 # 30 at the full run's work scale (0.3): the minimum needs many rounds here
ALLOCATIONS = 200_000
COMPUTE_STEPS = 1_000_000
RATE_HZ = 100
CONFIGS = { "none" => nil, "gc: false" => false, "gc: true" => true }.freeze

def allocate
  ALLOCATIONS.times { |i| [i] }
end

def compute
  value = 0
  COMPUTE_STEPS.times { |i| value = ((value * 31) + i) % 1_000_003 }
  value
end

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def timed
  started = thread_cpu
  yield
  thread_cpu - started
end

SondeBench::Workload.measure("gc_hook") do
  best = Hash.new { |hash, key| hash[key] = Float::INFINITY }
  random = Random.new(1)
  # Warm up: the heap grows to its working size and Sonde is loaded first.
  allocate
  compute
  Sonde.start(rate: RATE_HZ)
  Sonde.stop
  rounds = SondeBench::Workload.each_round(FULL_SIZE_ROUNDS) do
    CONFIGS.to_a.shuffle(random: random).each do |name, gc|
      Sonde.start(rate: RATE_HZ, gc: gc) unless gc.nil?
      best[[name, "allocate"]] = [best[[name, "allocate"]], timed { allocate }].min
      best[[name, "compute"]] = [best[[name, "compute"]], timed { compute }].min
      Sonde.stop unless gc.nil?
    end
  end
  { threads: 1, rounds: rounds, rate_hz: RATE_HZ, allocations: ALLOCATIONS, compute_steps: COMPUTE_STEPS,
    best_s: CONFIGS.keys.to_h { |name| [name, %w[allocate compute].to_h { |step| [step, best[[name, step]]] }] } }
end
