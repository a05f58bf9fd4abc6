# frozen_string_literal: true

# What starting and ending a thread costs under each profiler, side by
# side: threads started and joined one after another, each doing a few
# microseconds of work, with no profiler (twice: "none (A/A)" is the noise),
# Sonde, StackProf's cpu mode, Datadog's profiler, and on Ruby 3.3+ Vernier
# and pf2, all at 100 Hz. Issue 23 asks that Sonde keep thread creation
# within 10% of the unprofiled program: short jobs, parallel maps and
# servers that start a thread per connection pay it for every thread.
#
#   ruby bench/thread_start_cost.rb [ROUNDS] [THREADS] [SLICES] [SLICE_THREADS]
#     (rake bench:thread_starts; ROUNDS=9, THREADS=5000, SLICES=100, SLICE_THREADS=1000;
#     ROUNDS=0 skips the separate processes)
#   SONDE_BENCH_RUBIES=host,3.3,3.4 ruby bench/thread_start_cost.rb
#
# Each profiler is started by the benchmark's profiler hook
# (support/profiler_hook.rb) with bench/RESULTS.md's "Profilers compared"
# options, the peers from their own folders (`rake bench:peers`). The child
# (workloads/thread_starts.rb) starts 1,000 threads first, then reads its
# process CPU clock (user + sys of every thread, the profiler's own
# included) over THREADS more. Each round runs every (Ruby, profiler) pair
# once, in a shuffled order; printed are the median over rounds of CPU per
# thread, with the lowest and highest, and each column's median over the
# unprofiled one's.
#
# Separate processes differ by more than the 10% asked (the "none (A/A)"
# column), so each Ruby also runs SLICES rounds in one process
# (thread_start_in_process.rb), where a slice of SLICE_THREADS threads
# under each profiler is paired with the unprofiled slice of its round:
# that table carries the verdict. It runs twice: as the machine schedules
# it, and pinned to one CPU (taskset). Unpinned, a thread here is started
# on the other CPU and the cross-CPU wake-ups of this nested VM cost as
# much as the rest of the thread's start, and any thread more in the
# process (a native one that only sleeps does it too) moves that cost by
# about 10% on Ruby 3.3+; pinned, that part is gone and what is left over
# none is the profiler's own code. Writes markdown to stdout and to
# bench/THREAD_START_RESULTS.md (or $SONDE_BENCH_THREAD_START_RESULTS).
require "json"
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
    # Issue 23: thread creation slows by at most 10% under Sonde.
    TARGET_RATIO = 1.10
    AA_TOLERANCE = 0.01
    # The in-process slices run as scheduled and pinned to CPU 0.
    PLACEMENTS = { "as scheduled" => [], "pinned to one CPU" => %w[taskset -c 0] }.freeze
    COLUMNS = {
      "none" => "none",
      "none (A/A)" => "none",
      "Sonde" => "sonde",
      "StackProf cpu" => "stackprof-cpu",
      "Datadog" => "datadog",
      "Vernier" => "vernier",
      "pf2" => "pf2"
    }.freeze

    def initialize(rounds:, threads:, rubies:, slices:, slice_threads:)
      @rounds = rounds
      @threads = threads
      @rubies = rubies
      @slices = slices
      @slice_threads = slice_threads
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
        if @slices.positive?
          @in_process = @rubies.to_h do |ruby|
            [ruby.series, PLACEMENTS.to_h { |placement, prefix| [placement, in_process(ruby, lib, placement, prefix)] }]
          end
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

    def in_process(ruby, lib, placement, prefix)
      $stderr.puts "one process, #{ruby.name}, #{placement}: #{@slices} rounds of #{@slice_threads} threads"
      env, command = ruby.command({})
      script = File.join(__dir__, "thread_start_in_process.rb")
      output = IO.popen(env, [*prefix, *command, "-I", lib, script, @slices.to_s, @slice_threads.to_s, RATE.to_s],
                        chdir: ROOT, err: %i[child out], &:read)
      raise Child::Failure, "thread_start_in_process on #{ruby.name} failed:\n#{output}" unless $?.success?

      JSON.parse(output.lines.last).fetch("slices")
    end

    def cell(values) = format("%.1f (%.1f-%.1f)", median(values), values.min, values.max)

    def report
      lines = ["# What starting a thread costs", ""]
      lines << "Written by `rake bench:thread_starts` (bench/thread_start_cost.rb) on " \
               "#{Time.now.utc.strftime("%Y-%m-%d %H:%M")} UTC, Sonde at commit #{@commit}, load average " \
               "#{load_average} at the end."
      if @rounds.positive?
        lines << "Process CPU (user + sys, every thread) per thread of #{@threads} threads started and joined one " \
                 "after another (each summing 8 squares), after #{WARMUP_THREADS} more; microseconds, median of " \
                 "#{@rounds} interleaved rounds (lowest-highest), every Ruby and profiler shuffled in each round. " \
                 "\"/ none\" is a column's median over the unprofiled one's; \"none (A/A)\" is a second unprofiled " \
                 "column: its distance from 1 is the noise. Profilers at #{RATE} Hz, started as bench/RESULTS.md's " \
                 "\"Profilers compared\" says."
      end
      @rubies.each do |ruby|
        lines.concat(["", "## #{ruby.name}: #{ruby.description}"])
        lines.concat(["", *table(ruby)]) if @rounds.positive?
        lines.concat(["", *in_process_table(ruby)]) if @in_process
      end
      lines.join("\n") + "\n"
    end

    # Each kind's slice over the unprofiled slice of the same round, as
    # scheduled and pinned.
    def in_process_table(ruby)
      runs = @in_process.fetch(ruby.series)
      paired = runs.transform_values do |slices|
        none = slices.fetch("none")
        slices.transform_values { |values| values.zip(none).map { |value, base| value / base } }
      end
      lines = ["In one process (bench/thread_start_in_process.rb): #{@slices} rounds of #{@slice_threads} threads, " \
               "each kind's slice paired with the unprofiled one of its round; process CPU per thread (us), and " \
               "the paired ratio's median (p25-p75).", "",
               "| kind | #{PLACEMENTS.keys.map { |placement| "#{placement}: us | / none" }.join(" | ")} |",
               "|---|#{"---|---|" * PLACEMENTS.size}"]
      runs.first.last.each_key do |kind|
        cells = PLACEMENTS.keys.map do |placement|
          ratios = paired.fetch(placement).fetch(kind)
          format("%.1f | %.3f (%.3f-%.3f)", median(runs.fetch(placement).fetch(kind)), median(ratios),
                 percentile(ratios, 25), percentile(ratios, 75))
        end
        lines << "| #{kind} | #{cells.join(" | ")} |"
      end
      lines << ""
      PLACEMENTS.each_key do |placement|
        sonde = median(paired.fetch(placement).fetch("sonde"))
        aa = median(paired.fetch(placement).fetch("none (A/A)"))
        lines << format("- %s: Sonde / none %.3f (target <= %.2f): %s. A/A %.3f, %s 1.00 +- %.2f.", placement, sonde,
                        TARGET_RATIO, sonde <= TARGET_RATIO ? "met" : "NOT met", aa,
                        (aa - 1).abs <= AA_TOLERANCE ? "within" : "NOT within", AA_TOLERANCE)
      end
      lines
    end

    def percentile(values, pct)
      sorted = values.sort
      rank = (pct / 100.0) * (sorted.size - 1)
      low = sorted[rank.floor]
      low + ((sorted[rank.ceil] - low) * (rank - rank.floor))
    end

    def table(ruby)
      columns = COLUMNS.keys
      none = median(@results[[ruby.series, "none"]])
      lines = ["In separate processes, #{@rounds} rounds:", "", "| profiler | CPU per thread (us) | / none |",
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
  slices = Integer(ARGV.fetch(2, "100"))
  slice_threads = Integer(ARGV.fetch(3, "1000"))
  rubies = SondeBench::RubyTarget.for(ENV.fetch("SONDE_BENCH_RUBIES", SondeBench::Peers.ruby_series)
                                         .sub("host", SondeBench::Peers.ruby_series))
  missing = rubies.reject(&:available?)
  abort missing.map(&:reason).join("\n") unless missing.empty?
  table = SondeBench::ThreadStartCost.new(rounds: rounds, threads: threads, rubies: rubies, slices: slices,
                                          slice_threads: slice_threads).run
  puts table
  path = ENV.fetch("SONDE_BENCH_THREAD_START_RESULTS",
                   File.join(SondeBench::ThreadStartCost::ROOT, "bench", "THREAD_START_RESULTS.md"))
  File.write(path, table)
  warn "wrote #{path}"
end
