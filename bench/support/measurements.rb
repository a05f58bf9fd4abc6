# frozen_string_literal: true

# The benchmark's measurements, each a loop over child processes:
# - Overhead: every workload with no profiler and under each profiler, in
#   rounds of interleaved runs; each profiled run is divided by the
#   unprofiled run just before it in the same round (paired ratios).
# - SampleCost: Sonde's own sampling-time stats by thread count and depth.
# - LongRun: the threads workload for a long time (60 s by default), with
#   and without Sonde: RSS at the end, then the cost of Sonde.stop.
# Completeness (samples delivered versus asked) is read off the overhead runs.
require_relative "child"
require_relative "summary"

module SondeBench
  PROFILED_CONFIGS = [["sonde", 100], ["sonde", 1000], ["stackprof-cpu", 100], ["stackprof-cpu", 1000],
                      ["stackprof-wall", 100], ["stackprof-wall", 1000]].freeze
  WORKLOADS = %w[cpu threads deep many alloc].freeze
  NANOSECONDS_PER_SECOND = 1e9

  # Paired overhead ratios and the profiled runs behind them. A round is
  # [none, half of the profiled configurations, none, the other half].
  class Overhead
    attr_reader :ratios, :baselines, :runs

    def initialize(child, settings, log)
      @child = child
      @settings = settings
      @log = log
      @ratios = Hash.new { |hash, key| hash[key] = { elapsed: [], cpu: [] } }
      @baselines = Hash.new { |hash, key| hash[key] = [] }
      @runs = Hash.new { |hash, key| hash[key] = [] }
    end

    def measure
      random = Random.new(@settings.seed)
      @settings.pairs.times do |round|
        WORKLOADS.each { |workload| measure_round(workload, random) }
        @log.call("overhead: round #{round + 1}/#{@settings.pairs} done")
      end
      self
    end

    def ratio(workload, profiler, rate, kind)
      Summary.of(@ratios[[workload, Child.label(profiler, rate)]][kind])
    end

    # Sonde's sampling passes as a share of the workload's elapsed time.
    def sampling_share(workload, rate)
      Summary.of(@runs[[workload, Child.label("sonde", rate)]].map do |run|
        run.hook.fetch("stats").fetch("sampling_time_ns_total") / (run.elapsed_s * NANOSECONDS_PER_SECOND)
      end)
    end

    private

    def measure_round(workload, random)
      configs = PROFILED_CONFIGS.shuffle(random: random)
      configs.each_slice((configs.size / @settings.baselines_per_round.to_f).ceil) do |half|
        baseline = run(workload, "none", 0)
        @baselines[workload] << baseline
        half.each do |profiler, rate|
          profiled = run(workload, profiler, rate)
          @runs[[workload, profiled.label]] << profiled
          @ratios[[workload, profiled.label]][:elapsed] << profiled.elapsed_s / baseline.elapsed_s
          @ratios[[workload, profiled.label]][:cpu] << profiled.cpu_s / baseline.cpu_s
        end
      end
    end

    def run(workload, profiler, rate)
      @child.run(workload, profiler: profiler, rate: rate, scale: @settings.scale)
    end
  end

  # Samples delivered versus asked (rate x profiled duration, per thread).
  module Completeness
    Row = Struct.new(:threads, :threads_seen, :per_thread, :coverage, :one_thread_worth, keyword_init: true)

    module_function

    def of(runs)
      rows = runs.map { |run| row(run) }
      Row.new(threads: rows.map(&:threads).max, threads_seen: Summary.of(rows.map(&:threads_seen)),
              per_thread: Summary.of(rows.map(&:per_thread)), coverage: Summary.of(rows.map(&:coverage)),
              one_thread_worth: Summary.of(rows.map(&:one_thread_worth)))
    end

    # per_thread: the worst-served thread's share of what was asked; nil for
    # StackProf, which does not say which thread a sample belongs to.
    def row(run)
      asked = run.rate * run.hook.fetch("profile_duration_s")
      threads = run.details.fetch("threads")
      if run.profiler == "sonde"
        counts = run.hook.fetch("thread_samples")
        counts += [0] * (threads - counts.size) if counts.size < threads
        Row.new(threads: threads, threads_seen: counts.count(&:positive?), per_thread: counts.min / asked,
                coverage: counts.sum / (asked * threads), one_thread_worth: counts.sum / asked)
      else
        samples = run.hook.fetch("samples")
        Row.new(threads: threads, threads_seen: nil, per_thread: nil, coverage: samples / (asked * threads),
                one_thread_worth: samples / asked)
      end
    end
  end

  # What one sampling pass costs, by threads and depth, from Sonde's stats.
  class SampleCost
    SHAPES = [[1, 30], [1, 300], [8, 30], [8, 300], [200, 30], [200, 300]].freeze
    RATE_HZ = 1000

    Row = Struct.new(:threads, :depth, :passes, :pass_min_ns, :pass_avg_ns, :pass_max_ns, :per_thread_ns,
                     keyword_init: true)

    attr_reader :rows

    def initialize(child, settings, log)
      @child = child
      @settings = settings
      @log = log
      @runs = Hash.new { |hash, key| hash[key] = [] }
    end

    def measure
      @settings.cost_repeats.times do
        SHAPES.each do |threads, depth|
          env = { "SONDE_BENCH_THREADS" => threads.to_s, "SONDE_BENCH_DEPTH" => depth.to_s }
          @runs[[threads, depth]] << @child.run("sample_cost", profiler: "sonde", rate: RATE_HZ, scale: @settings.scale,
                                                               seconds: @settings.cost_seconds, env: env)
        end
      end
      @log.call("sample cost: done")
      @rows = SHAPES.map { |threads, depth| row(threads, depth, @runs[[threads, depth]]) }
      self
    end

    def row(threads, depth, runs)
      stats = runs.map { |run| run.hook.fetch("stats") }
      Row.new(threads: threads, depth: depth, passes: Summary.of(stats.map { |s| s.fetch("samples") }),
              pass_min_ns: stats.map { |s| s.fetch("sampling_time_ns_min") }.min,
              pass_avg_ns: Summary.of(stats.map { |s| s.fetch("sampling_time_ns_avg") }),
              pass_max_ns: stats.map { |s| s.fetch("sampling_time_ns_max") }.max,
              per_thread_ns: Summary.of(stats.map do |s|
                s.fetch("sampling_time_ns_total").to_f / [s.fetch("thread_samples"), 1].max
              end))
    end
  end

  # The long runs: memory after a long profile, and what stopping costs.
  class LongRun
    CONFIGS = [["none", 0], ["sonde", 100], ["sonde", 1000]].freeze
    WORKLOAD = "threads"

    attr_reader :runs

    def initialize(child, settings, log)
      @child = child
      @settings = settings
      @log = log
    end

    def measure
      @runs = CONFIGS.map do |profiler, rate|
        run = @child.run(WORKLOAD, profiler: profiler, rate: rate, scale: @settings.scale,
                                   seconds: @settings.long_seconds)
        @log.call("long run: #{run.label} done")
        run
      end
      self
    end
  end
end
