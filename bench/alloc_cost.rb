# frozen_string_literal: true

# What allocation profiling costs, measured alone: two allocation-heavy
# workloads (bench/workloads/alloc.rb, allocation from Ruby code, and
# json_parse.rb, allocation from a C extension) with no profiler, under
# Sonde's CPU/wall sampling alone, under Sonde with allocation sampling at
# several intervals and with the live heap, and under the peers' allocation
# modes (StackProf object mode, Vernier's allocation_interval where
# install_peers.rb installed it), on this machine's Ruby and on 3.3.
# Any NEWOBJ hook costs every allocation, sampled or not (on 3.1 it takes
# gc.c off its allocation fast path: see workloads/gc_hook.rb), so this is
# the number a user weighs before turning `alloc: true` on.
#
#   ruby bench/alloc_cost.rb [ROUNDS]   (rake bench:alloc; ROUNDS=7; 11-14 min here with 3.3)
#   ruby bench/alloc_cost.rb --smoke    one round at a tiny size: checks that every variant runs
#   SONDE_BENCH_RUBIES=3.1              this Ruby only (default: this Ruby and 3.3, where available)
#   SONDE_BENCH_WORK_SCALE=0.5          shorter runs (default 1.0: about 1 s of CPU each, unprofiled)
#   SONDE_BENCH_SEED=N                  another shuffle
#   SONDE_BENCH_ALLOC_RESULTS=PATH      where the report goes (default bench/ALLOC_RESULTS.md)
#
# It is not part of `rake bench` (that run already takes 20 to 45 minutes
# here): its report is a file of its own. Each round runs every variant
# once per workload and Ruby, in a shuffled order, one process each (the
# harness's Child: the process CPU time of the workload's body, user + sys
# of every thread, start-up and the profiler's stop left out). A run that
# crashes is recorded and reported, and the others go on: one crash should
# not cost the whole run's numbers; the exit status is 1 then.
require "fileutils"
require "open3"
require "tmpdir"
require_relative "support/child"
require_relative "support/measurements"
require_relative "support/alloc_report"
require_relative "../lib/sonde/options"

module SondeBench
  class AllocCost
    WORKLOADS = %w[alloc json_parse].freeze
    # Time sampling at Sonde's default rate, for every profiler that samples time.
    RATE_HZ = 100

    # A profiler configuration; alloc_interval nil leaves the profiler's
    # own default (see profiler_hook.rb, SONDE_BENCH_ALLOC_INTERVAL).
    # duty: Sonde's alloc_duty (through SONDE_ALLOC_DUTY; nil: its default).
    CONTINUOUS_DUTY = Sonde::Options::CONTINUOUS_ALLOC_DUTY
    Variant = Struct.new(:name, :profiler, :rate, :alloc_interval, :heap, :duty, keyword_init: true) do
      def env
        env = {}
        env["SONDE_BENCH_ALLOC_INTERVAL"] = alloc_interval.to_s if alloc_interval
        env["SONDE_BENCH_HEAP"] = "1" if heap
        env["SONDE_ALLOC_DUTY"] = duty.to_s if duty
        env
      end

      def samples_allocations?
        alloc_interval.to_i.positive? || heap
      end
    end

    # "none (A/A)" is a second unprofiled run in every round: its distance
    # from "none" is the noise the other rows are to be read against.
    # StackProf object mode takes no time samples (it is the allocation
    # profile alone); Vernier is shown without allocations too, so its
    # allocation cost can be told from its time sampling's, as Sonde's can.
    VARIANTS = [
      Variant.new(name: "none", profiler: "none", rate: 0),
      Variant.new(name: "none (A/A)", profiler: "none", rate: 0),
      Variant.new(name: "sonde", profiler: "sonde", rate: RATE_HZ, alloc_interval: 0),
      # Continuous mode's duty (one tick in 20 listened to), then listening
      # all the time (a one-off profile's default).
      *[1024, 256].map do |interval|
        Variant.new(name: "sonde alloc #{interval}", profiler: "sonde", rate: RATE_HZ, alloc_interval: interval,
                    duty: CONTINUOUS_DUTY)
      end,
      Variant.new(name: "sonde heap 1024", profiler: "sonde", rate: RATE_HZ, alloc_interval: 1024, heap: true,
                  duty: CONTINUOUS_DUTY),
      Variant.new(name: "sonde alloc 1024 duty 1", profiler: "sonde", rate: RATE_HZ, alloc_interval: 1024, duty: 1),
      Variant.new(name: "sonde heap 1024 duty 1", profiler: "sonde", rate: RATE_HZ, alloc_interval: 1024, heap: true,
                  duty: 1),
      *[1, 1024].map do |interval|
        Variant.new(name: "stackprof object #{interval}", profiler: "stackprof-object", rate: RATE_HZ,
                    alloc_interval: interval)
      end,
      Variant.new(name: "vernier", profiler: "vernier", rate: RATE_HZ, alloc_interval: 0),
      Variant.new(name: "vernier alloc 1024", profiler: "vernier", rate: RATE_HZ, alloc_interval: 1024)
    ].freeze
    BASELINE = "none"

    DEFAULT_ROUNDS = 7
    FULL = { rounds: DEFAULT_ROUNDS, scale: 1.0, rubies: "host,3.3",
             results: File.expand_path("ALLOC_RESULTS.md", __dir__) }.freeze
    SMOKE = { rounds: 1, scale: 0.05, rubies: "host",
              results: File.expand_path("../tmp/bench/ALLOC_RESULTS.smoke.md", __dir__) }.freeze

    # What the report needs from a run; runs is
    # { [workload, series, variant name] => [Child::Run or nil, by round] }.
    Result = Struct.new(:rounds, :scale, :seed, :rate_hz, :rubies, :workloads, :baseline, :variants, :runs, :failures,
                        :unavailable, :started, :finished, :command, :commit, keyword_init: true)

    def initialize(rounds:, scale:, rubies:, seed:, command:)
      @rounds = rounds
      @scale = scale
      @rubies = rubies.select(&:available?)
      @seed = seed
      @command = command
      @lineup = Lineup.new(@rubies, profilers: VARIANTS.map(&:profiler).uniq - ["none"])
      @runs = Hash.new { |hash, key| hash[key] = [] }
      @failures = []
    end

    def measure
      started = Time.now
      measured = commit # before Child copies lib/: the tree can change during the run
      random = Random.new(@seed)
      FileUtils.mkdir_p(File.join(Child::ROOT, "tmp"))
      Dir.mktmpdir("sonde-alloc-cost", File.join(Child::ROOT, "tmp")) do |dir|
        child = Child.new(dir)
        @rounds.times do |round|
          @rubies.each do |ruby|
            WORKLOADS.each do |workload|
              variants(ruby.series).shuffle(random: random).each do |variant|
                @runs[[workload, ruby.series, variant.name]][round] = run(child, workload, ruby, variant)
              end
            end
          end
          warn "alloc cost: round #{round + 1}/#{@rounds} done"
        end
      end
      Result.new(rounds: @rounds, scale: @scale, seed: @seed, rate_hz: RATE_HZ, rubies: @rubies, workloads: WORKLOADS,
                 baseline: BASELINE, variants: @rubies.to_h { |ruby| [ruby.series, variants(ruby.series)] }, runs: @runs,
                 failures: @failures, unavailable: @lineup.unavailable, started: started, finished: Time.now,
                 command: @command, commit: measured)
    end

    private

    def variants(series)
      available = @lineup.profilers(series)
      VARIANTS.select { |variant| variant.profiler == "none" || available.include?(variant.profiler) }
    end

    def run(child, workload, ruby, variant)
      child.run(workload, profiler: variant.profiler, rate: variant.rate, scale: @scale, ruby: ruby, env: variant.env)
    rescue Child::Failure => e
      @failures << "#{variant.name}: #{e.message}"
      warn "alloc cost: FAILED: #{@failures.last.lines.first(3).join}"
      nil
    end

    # Which Sonde is measured: the project's commit, marked when ext/ or
    # lib/ differ from it.
    def commit
      sha, = Open3.capture2("git", "rev-parse", "--short", "HEAD", chdir: Child::ROOT)
      dirty, = Open3.capture2("git", "status", "--porcelain", "--", "ext", "lib", chdir: Child::ROOT)
      "#{sha.strip}#{dirty.strip.empty? ? "" : " (ext/ or lib/ modified)"}"
    end
  end
end

if $PROGRAM_NAME == __FILE__
  smoke = ARGV.delete("--smoke")
  base = smoke ? SondeBench::AllocCost::SMOKE : SondeBench::AllocCost::FULL
  rubies = SondeBench::RubyTarget.for(ENV.fetch("SONDE_BENCH_RUBIES", base[:rubies]).sub("host",
                                                                                         SondeBench::Peers.ruby_series))
  rubies.reject(&:available?).each { |ruby| warn "alloc cost: #{ruby.name} skipped: #{ruby.reason}" }
  result = SondeBench::AllocCost.new(
    rounds: Integer(ARGV[0] || base[:rounds]), scale: Float(ENV.fetch("SONDE_BENCH_WORK_SCALE", base[:scale])),
    rubies: rubies, seed: Integer(ENV.fetch("SONDE_BENCH_SEED", "1")),
    command: smoke ? "rake bench:smoke" : "rake bench:alloc"
  ).measure
  markdown = SondeBench::AllocReport.new(result).to_markdown
  puts markdown
  path = ENV.fetch("SONDE_BENCH_ALLOC_RESULTS", base[:results])
  FileUtils.mkdir_p(File.dirname(path))
  File.write(path, markdown)
  warn "alloc cost: wrote #{path}"
  exit(result.failures.empty? ? 0 : 1)
end
