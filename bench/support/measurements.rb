# frozen_string_literal: true

# The benchmark's measurements, each a loop over child processes:
# - Overhead: every workload with no profiler and under each profiler, on
#   each Ruby (rubies.rb), in rounds of interleaved runs; each profiled run
#   is divided by the unprofiled run on the same Ruby just before it in the
#   same round (paired ratios), and the fastest profiled run by the fastest
#   unprofiled one (best-of, see BestOf); plus the CPU time of Sonde's own
#   threads and passes. Peers not installed on a Ruby are kept with the
#   reason, for the report to say so.
# - GcHook: what Sonde's GC accounting costs each allocation (one process).
# - SampleCost: Sonde's own sampling-time stats by thread count and depth.
# - LongRun: the threads workload for a long time (60 s by default), with
#   and without Sonde: RSS at the end, then the cost of Sonde.stop.
# Completeness (samples delivered versus asked) is read off the overhead runs.
require_relative "child"
require_relative "summary"

module SondeBench
  RATES = [100, 1000].freeze
  # Every profiler the overhead table measures, where available, in the
  # order the report lists them.
  PROFILERS = %w[sonde stackprof-cpu stackprof-wall datadog vernier pf2].freeze
  PEER_PROFILERS = %w[datadog vernier pf2].freeze
  WORKLOADS = %w[cpu threads deep many alloc].freeze
  NANOSECONDS_PER_SECOND = 1e9

  # The best-of estimate of a configuration's slowdown, robust to this
  # machine's noise. A run's time is the work, plus the profiler's cost, plus
  # whatever the machine's other tenants took from it; that last part is
  # never negative and comes and goes. The fastest of many runs is the one
  # the machine disturbed least, so min(profiled) / min(unprofiled) tends to
  # (work + cost) / work as the runs grow in number, while a median keeps the
  # typical disturbance, which differs between the two sides. Profiled and
  # unprofiled runs are interleaved in every round, so both minimums draw on
  # the same quiet moments. Its own spread: the same ratio of the 25th
  # percentiles (p25); when the two disagree, the estimate is not stable.
  # There are twice as many unprofiled runs, so their minimum is a little
  # lower: if anything, best-of overstates the cost. The A/A check applies
  # the estimator to two sets of unprofiled runs (the first and the second
  # of each round): the truth is 1.000, so its distance from 1 is the
  # estimator's own error at this many runs on this machine.
  BestOf = Struct.new(:min_ratio, :p25_ratio, :profiled_min, :baseline_min, :runs, :baselines, keyword_init: true) do
    def self.of(profiled, baseline)
      return nil if profiled.empty? || baseline.empty?

      new(min_ratio: profiled.min / baseline.min,
          p25_ratio: Summary.percentile(profiled, 0.25) / Summary.percentile(baseline, 0.25),
          profiled_min: profiled.min, baseline_min: baseline.min, runs: profiled.size, baselines: baseline.size)
    end
  end

  # Which profilers run on each Ruby: Sonde and StackProf everywhere (Sonde
  # built for it, StackProf from Debian), a peer where install_peers.rb put
  # it. unavailable: { series => { profiler => reason } }, for the report.
  class Lineup
    attr_reader :rubies, :unavailable

    def initialize(rubies, profilers: PROFILERS)
      @rubies = rubies.select(&:available?)
      @unavailable = Hash.new { |hash, key| hash[key] = {} }
      @profilers = {}
      @rubies.each do |ruby|
        status = ruby.peer_status
        @profilers[ruby.series] = profilers.select do |profiler|
          next true unless PEER_PROFILERS.include?(profiler)

          @unavailable[ruby.series][profiler] = status.fetch(profiler).fetch("reason") unless
            status.fetch(profiler).fetch("available")
          status.fetch(profiler).fetch("available")
        end
      end
    end

    def profilers(series)
      @profilers.fetch(series)
    end

    # [[profiler, rate], ...] on this Ruby.
    def configs(series)
      profilers(series).product(RATES)
    end

    def version(series, profiler)
      ruby = @rubies.find { |r| r.series == series }
      ruby.peer_status.fetch(profiler)["version"]
    end
  end

  # Paired overhead ratios and the profiled runs behind them. A round is,
  # on each Ruby: [none, half of the profiled configurations, none, the
  # other half]. Everything is keyed by [workload, Ruby series, label].
  class Overhead
    attr_reader :ratios, :baselines, :runs, :lineup

    def initialize(child, settings, log, lineup)
      @child = child
      @settings = settings
      @log = log
      @lineup = lineup
      @ratios = Hash.new { |hash, key| hash[key] = { elapsed: [], cpu: [] } }
      @baselines = Hash.new { |hash, key| hash[key] = [] } # [workload, series]
      @baselines_by_slot = Hash.new { |hash, key| hash[key] = [] } # [workload, series, slot in the round]
      @runs = Hash.new { |hash, key| hash[key] = [] }
    end

    def measure
      random = Random.new(@settings.seed)
      @settings.pairs.times do |round|
        WORKLOADS.each do |workload|
          @lineup.rubies.each { |ruby| measure_round(workload, ruby, random) }
        end
        @log.call("overhead: round #{round + 1}/#{@settings.pairs} done")
      end
      self
    end

    def ratio(workload, series, profiler, rate, kind)
      Summary.of(@ratios[[workload, series, Child.label(profiler, rate)]][kind])
    end

    def profiled_runs(workload, series, profiler, rate)
      @runs[[workload, series, Child.label(profiler, rate)]]
    end

    # kind: :elapsed or :cpu (Run#elapsed_s or Run#cpu_s).
    def best_of(workload, series, profiler, rate, kind)
      field = kind == :cpu ? :cpu_s : :elapsed_s
      BestOf.of(profiled_runs(workload, series, profiler, rate).map(&field), @baselines[[workload, series]].map(&field))
    end

    # The A/A check: best-of of the second unprofiled run of each round over
    # the first. nil with one unprofiled run per round (the smoke run).
    def best_of_aa(workload, series, kind)
      return nil if @settings.baselines_per_round < 2

      field = kind == :cpu ? :cpu_s : :elapsed_s
      BestOf.of(@baselines_by_slot[[workload, series, 1]].map(&field), @baselines_by_slot[[workload, series, 0]].map(&field))
    end

    # The time a profiler says it spent sampling (Sonde's passes, Datadog's
    # CPU samples: their own stats), as a share of the workload's elapsed
    # time; nil for profilers that do not say.
    def sampling_share(workload, series, profiler, rate)
      Summary.of(profiled_runs(workload, series, profiler, rate).map do |run|
        total = run.profiler == "sonde" ? run.hook.fetch("stats").fetch("sampling_time_ns_total") : run.hook["sampling_time_ns_total"]
        total && total / (run.elapsed_s * NANOSECONDS_PER_SECOND)
      end)
    end

    # Sonde's own CPU time as a share of the time it profiled (see OwnCpu).
    def own_cpu_share(workload, series, rate)
      Summary.of(profiled_runs(workload, series, "sonde", rate).map { |run| OwnCpu.of(run).share })
    end

    private

    def measure_round(workload, ruby, random)
      configs = @lineup.configs(ruby.series).shuffle(random: random)
      configs.each_slice((configs.size / @settings.baselines_per_round.to_f).ceil).with_index do |half, slot|
        baseline = run(workload, ruby, "none", 0)
        @baselines[[workload, ruby.series]] << baseline
        @baselines_by_slot[[workload, ruby.series, slot]] << baseline
        half.each do |profiler, rate|
          profiled = run(workload, ruby, profiler, rate)
          key = [workload, ruby.series, profiled.label]
          @runs[key] << profiled
          @ratios[key][:elapsed] << profiled.elapsed_s / baseline.elapsed_s
          @ratios[key][:cpu] << profiled.cpu_s / baseline.cpu_s
        end
      end
    end

    def run(workload, ruby, profiler, rate)
      @child.run(workload, profiler: profiler, rate: rate, scale: @settings.scale, ruby: ruby)
    end
  end

  # The CPU time Sonde itself used in one run: its own threads (the trigger
  # and the idle helper, read from /proc by the hook just before the stop)
  # plus the sampling passes that ran in the application's threads (from
  # Sonde's stats). Passes run by the idle helper are already in its thread's
  # CPU time; the stats do not split the pass time by who ran it, so the
  # application's share is taken in proportion to the pass count. Passes are
  # timed on the monotonic clock: a pass preempted on a busy machine counts
  # its wait too. Not in it: signal delivery (the kernel charges the
  # interrupted thread), the GC hook, and what the hook costs every
  # allocation (GcHook).
  OwnCpu = Struct.new(:threads_ns, :passes_ns, :profiled_s, keyword_init: true) do
    def self.of(run)
      hook = run.hook
      stats = hook.fetch("stats")
      passes = stats.fetch("samples")
      in_app = passes.zero? ? 0 : (passes - stats.fetch("idle_samples")).fdiv(passes)
      new(threads_ns: hook.fetch("own_threads").sum { |thread| thread.fetch("cpu_ns") },
          passes_ns: stats.fetch("sampling_time_ns_total") * in_app, profiled_s: hook.fetch("profiled_s"))
    end

    def share
      (threads_ns + passes_ns) / (profiled_s * NANOSECONDS_PER_SECOND)
    end
  end

  # Samples delivered versus asked (rate x profiled duration, per thread).
  module Completeness
    Row = Struct.new(:threads, :threads_seen, :per_thread, :coverage, :one_thread_worth, :unstarted, :no_frames,
                     keyword_init: true)

    module_function

    def of(runs)
      rows = runs.map { |run| row(run) }
      Row.new(threads: rows.map(&:threads).max, threads_seen: Summary.of(rows.map(&:threads_seen)),
              per_thread: Summary.of(rows.map(&:per_thread)), coverage: Summary.of(rows.map(&:coverage)),
              one_thread_worth: Summary.of(rows.map(&:one_thread_worth)),
              unstarted: Summary.of(rows.map(&:unstarted)), no_frames: Summary.of(rows.map(&:no_frames)))
    end

    # per_thread: the worst-served thread's share of what was asked; nil for
    # StackProf, which does not say which thread a sample belongs to. For
    # Sonde, threads are told apart by their thread id; samples under thread
    # id 0 (threads not started yet, on Ruby 3.1, all sharing that id) are no
    # thread of their own: they count in coverage, not as a thread.
    # unstarted and no_frames: those samples, and the samples with no frame
    # at all, as shares of all of Sonde's samples.
    def row(run)
      asked = run.rate * run.hook.fetch("profile_duration_s")
      threads = run.details.fetch("threads")
      if run.profiler == "sonde"
        counts = run.hook.fetch("thread_samples")
        counts += [0] * (threads - counts.size) if counts.size < threads
        total = run.hook.fetch("wall_samples")
        Row.new(threads: threads, threads_seen: counts.count(&:positive?), per_thread: counts.min / asked,
                coverage: total / (asked * threads), one_thread_worth: total / asked,
                unstarted: run.hook.fetch("unstarted_samples").fdiv(total),
                no_frames: run.hook.fetch("no_frame_samples").fdiv(total))
      else
        samples = run.hook.fetch("samples")
        Row.new(threads: threads, threads_seen: nil, per_thread: nil, coverage: samples / (asked * threads),
                one_thread_worth: samples / asked)
      end
    end
  end

  # What Sonde's GC accounting costs an allocation: the gc_hook workload, one
  # process that starts and stops Sonde itself (see the workload).
  class GcHook
    attr_reader :run

    def initialize(child, settings, log)
      @child = child
      @settings = settings
      @log = log
    end

    def measure
      @run = @child.run("gc_hook", profiler: "none", rate: 0, scale: @settings.scale)
      @log.call("gc hook: done")
      self
    end

    # What the workload reported: best_s is { "none" => { "allocate" => s,
    # "compute" => s }, "gc: false" => ..., ... }; the rest are its settings.
    %w[best_s allocations rounds compute_steps rate_hz].each do |key|
      define_method(key) { @run.details.fetch(key) }
    end
  end

  # What labels cost a Rack request (bench/workloads/labels.rb), on each Ruby.
  class LabelsCost
    attr_reader :runs # RubyTarget => Child::Run

    def initialize(child, settings, log, rubies)
      @child = child
      @settings = settings
      @log = log
      @rubies = rubies.select(&:available?)
    end

    def measure
      @runs = @rubies.to_h { |ruby| [ruby, @child.run("labels", profiler: "none", rate: 0, scale: @settings.scale, ruby: ruby)] }
      @log.call("labels: done")
      self
    end
  end

  # What one sampling pass costs, by threads and depth, from Sonde's stats;
  # and in the shape of a Rails worker under Puma (WORKER: 9 threads 90-145
  # frames deep, 6 parked, 3 serving requests; issue 22 measured 108 µs a
  # pass in a real one), on every Ruby of the run: what a pass does for a
  # parked thread depends on the Ruby (3.3+ count GVL acquisitions, 3.1
  # reads each thread's CPU clock).
  class SampleCost
    SHAPES = [[1, 30], [1, 300], [8, 30], [8, 300], [200, 30], [200, 300]].freeze
    RATE_HZ = 1000
    WORKER = "puma_worker"
    # The worker shape runs at Sonde's default rate, as the worker issue 22
    # measured did: at 1000 Hz the overhead budget spaces the passes out to
    # 400-800 a second, and a pass then finds less changed than one 10 ms
    # after the last (25 us against 38 here).
    WORKER_RATE_HZ = 100
    # A worker runs for hours: its passes are timed over WORKER_SECONDS, so
    # that the first ones (every thread met, every stack read and interned
    # for the first time, a few hundred µs each) weigh in the average as
    # little as in a short minute of a real worker, not as in 2 s.
    WORKER_SECONDS = 8.0

    Row = Struct.new(:threads, :depth, :passes, :pass_min_ns, :pass_avg_ns, :pass_p50_ns, :pass_max_ns, :per_thread_ns,
                     keyword_init: true)
    # A serving thread's stack read as a pass reads it, 10 ms of the
    # application after the previous read, and the same read right after
    # (puma_worker.rb, SONDE_BENCH_STACK_READS; no profiler running).
    StackReads = Struct.new(:reads, :frames, :first_ns, :again_ns, keyword_init: true)

    attr_reader :rows, :worker_rows, :stack_reads # RubyTarget => Row, RubyTarget => StackReads

    def initialize(child, settings, log, rubies)
      @child = child
      @settings = settings
      @log = log
      @rubies = rubies.select(&:available?)
      @runs = Hash.new { |hash, key| hash[key] = [] }
    end

    def measure
      @settings.cost_repeats.times do
        SHAPES.each do |threads, depth|
          env = { "SONDE_BENCH_THREADS" => threads.to_s, "SONDE_BENCH_DEPTH" => depth.to_s }
          @runs[[threads, depth]] << @child.run("sample_cost", profiler: "sonde", rate: RATE_HZ, scale: @settings.scale,
                                                               seconds: @settings.cost_seconds, env: env)
        end
        @rubies.each do |ruby|
          @runs[[WORKER, ruby]] << @child.run(WORKER, profiler: "sonde", rate: WORKER_RATE_HZ, scale: @settings.scale,
                                                      seconds: worker_seconds, ruby: ruby)
          @runs[[:stack_reads, ruby]] << @child.run(WORKER, profiler: "none", rate: 0, scale: @settings.scale,
                                                            seconds: worker_seconds, ruby: ruby,
                                                            env: { "SONDE_BENCH_STACK_READS" => "1" })
        end
      end
      @log.call("sample cost: done")
      @rows = SHAPES.map { |threads, depth| row(threads, depth, @runs[[threads, depth]]) }
      @worker_rows = @rubies.to_h do |ruby|
        runs = @runs[[WORKER, ruby]]
        [ruby, row(runs.first.details.fetch("threads"), "90-145", runs)]
      end
      @stack_reads = @rubies.to_h { |ruby| [ruby, stack_reads_of(@runs[[:stack_reads, ruby]])] }
      self
    end

    def stack_reads_of(runs)
      reads = runs.map { |run| run.details.fetch("stack_reads") }
      StackReads.new(reads: reads.sum { |r| r.fetch("reads") }, frames: Summary.of(reads.map { |r| r.fetch("frames") }),
                     first_ns: Summary.of(reads.map { |r| r.fetch("first_ns") }),
                     again_ns: Summary.of(reads.map { |r| r.fetch("again_ns") }))
    end

    # The smoke run keeps its tiny length for every shape.
    def worker_seconds
      @settings.smoke ? @settings.cost_seconds : WORKER_SECONDS
    end

    def row(threads, depth, runs)
      stats = runs.map { |run| run.hook.fetch("stats") }
      Row.new(threads: threads, depth: depth, passes: Summary.of(stats.map { |s| s.fetch("samples") }),
              pass_min_ns: stats.map { |s| s.fetch("sampling_time_ns_min") }.min,
              pass_avg_ns: Summary.of(stats.map { |s| s.fetch("sampling_time_ns_avg") }),
              pass_p50_ns: Summary.of(stats.map { |s| s.fetch("sampling_time_ns_p50") }),
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
