# frozen_string_literal: true

# What an idle process costs under each profiler, side by side: a process
# whose main thread and N more threads sleep, with no profiler (twice: the
# second column, "none (A/A)", is the noise), Sonde, StackProf's wall mode,
# Datadog's profiler, and on Ruby 3.3+ Vernier and pf2, all at 100 Hz. Most
# of a fleet waits (Puma and Sidekiq threads in IO.select, Queue#pop,
# sleep): this is what it pays for profiling while it does.
#
#   ruby bench/idle_cost.rb [ROUNDS] [SECONDS]     (rake bench:idle; ROUNDS=5, SECONDS=4)
#   SONDE_BENCH_RUBIES=3.1,3.3 ruby bench/idle_cost.rb   also on 3.3 (script/ruby33; rake bench:idle does both)
#
# Each profiler is started by the benchmark's profiler hook
# (support/profiler_hook.rb, hooks/), with the options bench/RESULTS.md's
# "Profilers compared" lists, and the peers load from their own folders
# (support/peers.rb; `rake bench:peers` installs them). A profiler that is
# not installed or not supported on a Ruby is listed under its table as not
# available, with the reason. The child (workloads/idle.rb) lets half a
# second pass (start-up is bench/startup_cost.rb's question), then reads
# its process CPU clock (user + sys of every thread, the profiler's own
# included) over SECONDS of wall time. Each round runs every (Ruby,
# threads, profiler) triple once, in a shuffled order; printed are the
# median over rounds of CPU per wall second, with the lowest and highest,
# and Sonde's passes (samples) per second over the window. Writes markdown
# to stdout and to bench/IDLE_RESULTS.md (or $SONDE_BENCH_IDLE_RESULTS).
require "tmpdir"
require_relative "support/child"
require_relative "support/rubies"
require_relative "support/side_by_side"

module SondeBench
  class IdleCost
    include SideBySide

    ROOT = Child::ROOT
    SCRIPT = File.join(__dir__, "workloads", "idle.rb")
    THREAD_COUNTS = [0, 8, 32, 128].freeze
    RATE = 100
    WARMUP_SECONDS = 0.5
    # Column => the profiler hook's name for it.
    COLUMNS = {
      "none" => "none",
      "none (A/A)" => "none",
      "Sonde" => "sonde",
      "StackProf wall" => "stackprof-wall",
      "Datadog" => "datadog",
      "Vernier" => "vernier",
      "pf2" => "pf2"
    }.freeze

    def initialize(rounds:, seconds:, rubies:)
      @rounds = rounds
      @seconds = seconds
      @rubies = rubies
      @results = Hash.new { |hash, key| hash[key] = [] }
    end

    def run
      Dir.mktmpdir("sonde-idle-cost", File.join(ROOT, "tmp")) do |dir|
        @commit = commit
        child = Child.new(dir)
        lib = File.join(dir, "lib")
        @missing = @rubies.to_h { |ruby| [ruby.series, missing_columns(ruby, lib, COLUMNS)] }
        triples = @rubies.flat_map do |ruby|
          THREAD_COUNTS.product(COLUMNS.keys - @missing[ruby.series].keys).map { |threads, column| [ruby, threads, column] }
        end
        interleave(triples, rounds: @rounds, results: @results) do |ruby, threads, column|
          measure(child, ruby, threads, column)
        end
      end
      report
    end

    private

    def measure(child, ruby, threads, column)
      facts, _hook = child.run_script(SCRIPT, [threads, WARMUP_SECONDS, @seconds].map(&:to_s),
                                      profiler: COLUMNS.fetch(column), rate: RATE, ruby: ruby,
                                      timeout_s: WARMUP_SECONDS + @seconds, profile_out: nil)
      wall = facts.fetch("wall_s")
      { share: facts.fetch("cpu_s") / wall, passes_per_second: facts["passes"]&.fdiv(wall) }
    end

    def percent(share) = format("%.3f%%", share * 100)

    def cell(runs)
      shares = runs.map { |run| run[:share] }
      "#{percent(median(shares))} (#{percent(shares.min)}-#{percent(shares.max)})"
    end

    def report
      lines = ["# What an idle process costs", ""]
      lines << "Written by `rake bench:idle` (bench/idle_cost.rb) on #{Time.now.utc.strftime("%Y-%m-%d %H:%M")} UTC, " \
               "Sonde at commit #{@commit}, load average #{load_average} at the end."
      lines << "Process CPU (user + sys, every thread) per wall second of a process whose main thread and N more " \
               "threads sleep, over #{@seconds} s after #{WARMUP_SECONDS} s of start-up; median of #{@rounds} " \
               "interleaved rounds (lowest-highest), every Ruby, thread count and profiler shuffled in each round. " \
               "Profilers at #{RATE} Hz, started as bench/RESULTS.md's \"Profilers compared\" says; " \
               "\"none (A/A)\" is a second unprofiled column: its distance from \"none\" is the noise."
      @rubies.each { |ruby| lines.concat(["", *table(ruby)]) }
      lines.join("\n") + "\n"
    end

    def table(ruby)
      columns = COLUMNS.keys - @missing[ruby.series].keys
      lines = ["## #{ruby.name}: #{ruby.description}", ""]
      lines << "| sleeping threads | #{columns.join(" | ")} | Sonde passes per second |"
      lines << "|---|#{"---|" * columns.size}---|"
      THREAD_COUNTS.each do |threads|
        cells = columns.map { |column| cell(@results[[ruby.series, threads, column]]) }
        passes = @results[[ruby.series, threads, "Sonde"]].filter_map { |run| run[:passes_per_second] }
        lines << "| #{threads} | #{cells.join(" | ")} | #{passes.empty? ? "-" : format("%.1f", median(passes))} |"
      end
      lines + missing_notes(@missing[ruby.series], "not available")
    end
  end
end

if $PROGRAM_NAME == __FILE__
  rounds = Integer(ARGV.fetch(0, "5"))
  seconds = Float(ARGV.fetch(1, "4"))
  rubies = SondeBench::RubyTarget.for(ENV.fetch("SONDE_BENCH_RUBIES", SondeBench::Peers.ruby_series)
                                         .sub("host", SondeBench::Peers.ruby_series))
  missing = rubies.reject(&:available?)
  abort missing.map(&:reason).join("\n") unless missing.empty?
  table = SondeBench::IdleCost.new(rounds: rounds, seconds: seconds, rubies: rubies).run
  puts table
  path = ENV.fetch("SONDE_BENCH_IDLE_RESULTS", File.join(SondeBench::IdleCost::ROOT, "bench", "IDLE_RESULTS.md"))
  File.write(path, table)
  warn "wrote #{path}"
end
