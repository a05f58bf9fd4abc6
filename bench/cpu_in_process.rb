# frozen_string_literal: true

# The cpu workload in one process, in slices: each round runs one slice with
# no profiler, one under Sonde and one under StackProf's cpu mode, in a
# shuffled order, each profiler started just before its slice and stopped
# just after. Both profilers are loaded from the start, so the three kinds of
# slice share one heap, one set of loaded code and the same moment of the
# machine: what differs between them is the sampling alone, not what loading
# a profiler does to the heap's layout and GC count, which in separate
# processes moved the CPU time by more than the whole gap being measured.
# A GC.start before each slice gives each the same heap to start from.
#
#   ruby bench/cpu_in_process.rb ROUNDS RATE SLICE_REQUESTS
#
# Prints one JSON line: {"none" => [[process_cpu_s, thread_cpu_s], ...], ...}
# (one pair per round), and the samples each profiler took in all, for
# bench/cpu_vs_stackprof.rb; a profiler that took none fails the run.
require "json"
require "sonde"
require "stackprof"
require_relative "support/workload"
require_relative "workloads/cpu_app"

rounds = Integer(ARGV.fetch(0))
rate = Integer(ARGV.fetch(1))
slice = Integer(ARGV.fetch(2))
# "none (A/A)" is a second unprofiled slice: its ratio to "none" is the
# noise left in the comparison.
kinds = ["none", "none (A/A)", "sonde", "stackprof-cpu"]
app = build_cpu_app
thread_cpu = -> { Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) }
# Thread clock first: it brings the process clock up to date (see
# SondeBench::Workload.process_cpu in support/workload.rb).
process_cpu = -> { SondeBench::Workload.process_cpu }
request = 0
run_slice = -> { slice.times { call_cpu_app(app, request += 1) } }
run_slice.call # warm up: methods' inline caches, the heap's size
results = kinds.to_h { |kind| [kind, []] }
samples = Hash.new(0)
random = Random.new(1)
rounds.times do
  kinds.shuffle(random: random).each do |kind|
    GC.start
    case kind
    when "sonde" then Sonde.start(rate: rate)
    when "stackprof-cpu" then StackProf.start(mode: :cpu, interval: 1_000_000 / rate, raw: true)
    end
    thread_started = thread_cpu.call
    process_started = process_cpu.call
    run_slice.call
    thread_used = thread_cpu.call - thread_started
    results[kind] << [process_cpu.call - process_started, thread_used]
    case kind
    when "sonde"
      Sonde.stop
      samples[kind] += Sonde.stats.fetch(:cpu_samples)
    when "stackprof-cpu"
      StackProf.stop
      samples[kind] += StackProf.results.fetch(:samples)
    end
  end
end
%w[sonde stackprof-cpu].each { |kind| abort "cpu_in_process: #{kind} took no sample" if samples[kind].zero? }
puts JSON.generate(slices: results, samples: samples)
