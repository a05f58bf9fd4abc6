# frozen_string_literal: true

# What starting and ending a thread costs under each profiler, side by
# side: threads started and joined one after another, each doing a few
# microseconds of work, with no profiler (twice: "none (A/A)" is the noise),
# Sonde, StackProf's cpu mode, Datadog's profiler, and on Ruby 3.3+ Vernier
# and pf2, all at 100 Hz. Issue 23 asks that Sonde keep thread creation
# within 10% of the unprofiled program: short jobs, parallel maps and
# servers that start a thread per connection pay it for every thread.
#
#   ruby bench/thread_start_cost.rb [ROUNDS] [THREADS]     (rake bench:thread_starts; ROUNDS=9, THREADS=5000)
#   SONDE_BENCH_RUBIES=host,3.3,3.4 ruby bench/thread_start_cost.rb
#
# Each profiler is started by the benchmark's profiler hook
# (support/profiler_hook.rb) with bench/RESULTS.md's "Profilers compared"
# options, the peers from their own folders (`rake bench:peers`). The child
# (workloads/thread_starts.rb) starts 1,000 threads first, then reads its
# process CPU clock (user + sys of every thread, the profiler's own
# included) over THREADS more. The same workload counted under perf
# (where each profiler's code and the kernel's timers and signals took
# the CPU, which no timing noise moves) is `ruby bench/cpu_cost_perf.rb
# --workload thread_starts`; `rake bench:thread_starts` runs both. Each round runs every (Ruby, profiler) pair
# once, in a shuffled order; printed are the median over rounds of CPU per
# thread, with the lowest and highest, and each column's median over the
# unprofiled one's. Writes markdown to stdout and to
# bench/THREAD_START_RESULTS.md (or $SONDE_BENCH_THREAD_START_RESULTS).
require "tmpdir"
require_relative "support/child"
require_relative "support/rubies"
require_relative "support/side_by_side"

module SondeBench
  class ThreadStartCost
    include SideBySide

    ROOT = Child::ROOT
    WORKLOAD = "thread_starts"
    FULL_SIZE_THREADS = 5_000 # workloads/thread_starts.rb's, at scale 1
    WARMUP_THREADS = 1_000
    RATE = 100
    COLUMNS = {
      "none" => "none",
      "none (A/A)" => "none",
      "Sonde" => "sonde",
      "StackProf cpu" => "stackprof-cpu",
      "Datadog" => "datadog",
      "Vernier" => "vernier",
      "pf2" => "pf2"
    }.freeze

    def initialize(rounds:, threads:, rubies:)
      @rounds = rounds
      @threads = threads
      @rubies = rubies
      @results = Hash.new { |hash, key| hash[key] = [] }
    end

    def run
      Dir.mktmpdir("sonde-thread-start-cost", File.join(ROOT, "tmp")) do |dir|
        @commit = commit
        child = Child.new(dir)
        lib = File.join(dir, "lib")
        @missing = @rubies.to_h { |ruby| [ruby.series, missing_columns(ruby, lib, COLUMNS)] }
        pairs = @rubies.flat_map { |ruby| (COLUMNS.keys - @missing[ruby.series].keys).map { |column| [ruby, column] } }
        # A profiler whose child fails or overruns (Vernier on 3.3 did not
        # finish 21,000 threads in 141 s: its cost per thread grows with the
        # threads made, 125 us at 1,000 and 199 us at 4,000) is left out of
        # the later rounds, and its row says why.
        interleave(pairs, rounds: @rounds, results: @results, missing: @missing) do |ruby, column|
          measure(child, ruby, column)
        end
      end
      report
    end

    private

    # CPU per thread, in microseconds.
    def measure(child, ruby, column)
      run = child.run(WORKLOAD, profiler: COLUMNS.fetch(column), rate: RATE, ruby: ruby,
                                scale: @threads.fdiv(FULL_SIZE_THREADS))
      run.cpu_s * 1e6 / run.details.fetch("threads")
    end

    def cell(values) = format("%.1f (%.1f-%.1f)", median(values), values.min, values.max)

    def report
      lines = ["# What starting a thread costs", ""]
      lines << "Written by `rake bench:thread_starts` (bench/thread_start_cost.rb) on " \
               "#{Time.now.utc.strftime("%Y-%m-%d %H:%M")} UTC, Sonde at commit #{@commit}, load average " \
               "#{load_average} at the end."
      lines << "Process CPU (user + sys, every thread) per thread of #{@threads} threads started and joined one " \
               "after another (each summing 8 squares), after #{WARMUP_THREADS} more; microseconds, median of " \
               "#{@rounds} interleaved rounds (lowest-highest), every Ruby and profiler shuffled in each round. " \
               "\"/ none\" is a column's median over the unprofiled one's; \"none (A/A)\" is a second unprofiled " \
               "column: its distance from 1 is the noise. Profilers at #{RATE} Hz, started as bench/RESULTS.md's " \
               "\"Profilers compared\" says."
      @rubies.each { |ruby| lines.concat(["", *table(ruby)]) }
      lines.join("\n") + "\n"
    end

    def table(ruby)
      columns = COLUMNS.keys
      none = median(@results[[ruby.series, "none"]])
      lines = ["## #{ruby.name}: #{ruby.description}", "", "| profiler | CPU per thread (us) | / none |",
               "|---|---|---|"]
      columns.each do |column|
        values = @results[[ruby.series, column]]
        next if values.empty?

        lines << "| #{column} | #{cell(values)} | #{format("%.2f", median(values) / none)} |"
      end
      lines + missing_notes(@missing[ruby.series], "not measured")
    end
  end
end

if $PROGRAM_NAME == __FILE__
  rounds = Integer(ARGV.fetch(0, "9"))
  threads = Integer(ARGV.fetch(1, "5000"))
  rubies = SondeBench::RubyTarget.for(ENV.fetch("SONDE_BENCH_RUBIES", SondeBench::Peers.ruby_series)
                                         .sub("host", SondeBench::Peers.ruby_series))
  missing = rubies.reject(&:available?)
  abort missing.map(&:reason).join("\n") unless missing.empty?
  table = SondeBench::ThreadStartCost.new(rounds: rounds, threads: threads, rubies: rubies).run
  puts table
  path = ENV.fetch("SONDE_BENCH_THREAD_START_RESULTS",
                   File.join(SondeBench::ThreadStartCost::ROOT, "bench", "THREAD_START_RESULTS.md"))
  File.write(path, table)
  warn "wrote #{path}"
end
