# frozen_string_literal: true

# The one overhead target that compares Sonde with a peer, measured alone so
# that it can have many rounds: the cpu workload's process CPU time (user +
# sys of every thread, the profilers' own included) under Sonde and under
# StackProf's cpu mode, both at the same rate, against no profiler.
#
#   ruby bench/cpu_vs_stackprof.rb [ROUNDS] [RATE] [SLICES] [SLICE_REQUESTS]
#                                          (rake bench:cpu_vs_stackprof)
#   SONDE_BENCH_RUBIES=3.1,3.3 ...         also on 3.3 (script/ruby33)
#
# ROUNDS of separate processes (0: none), then SLICES rounds of slices of
# SLICE_REQUESTS requests in one process (defaults 30, 100 Hz, 100, 2500).
#
# Each round runs none (twice: "none (A/A)" is the second, whose ratio to
# the first is the noise left after pairing), sonde and stackprof-cpu once
# each, in a shuffled order, on each Ruby in turn: the machine's noise
# reaches all of them alike. Issue 24 asks for enough rounds that the A/A
# row reads 1.00 +- 0.01; each report says whether it does.
# Printed per Ruby and profiler: the median and 25th percentile of process
# CPU time, and the median over rounds of profiled / unprofiled CPU within
# the round (paired). The verdict is Sonde's paired median minus
# StackProf's, in percent of the unprofiled CPU, against the +0.5% target,
# with the spread of the unprofiled runs beside it to say how firm it is.
require "json"
require "tmpdir"
require_relative "support/child"
require_relative "support/rubies"

module SondeBench
  class CpuVersusStackprof
    # Column => the profiler hook's name for it.
    COLUMNS = { "none" => "none", "none (A/A)" => "none", "sonde" => "sonde", "stackprof-cpu" => "stackprof-cpu" }.freeze
    PROFILERS = COLUMNS.keys.freeze
    TARGET_POINTS = 0.5
    # How far from 1 the A/A ratio may be for the comparison to be read
    # to a point of the unprofiled CPU (issue 24).
    AA_TOLERANCE = 0.01

    # Work per run, as SONDE_BENCH_WORK_SCALE: about 1 s of CPU.
    SCALE = 0.5

    # Rounds and requests per slice of the one-process comparison, by
    # default (a slice of 2500 is about 0.4 s of CPU here).
    IN_PROCESS_ROUNDS = 100
    SLICE_REQUESTS = 2500

    def initialize(rounds:, rate:, rubies:, slices: IN_PROCESS_ROUNDS, slice_requests: SLICE_REQUESTS)
      @rounds = rounds
      @slices = slices
      @slice_requests = slice_requests
      @rate = rate
      @rubies = rubies
      @runs = Hash.new { |hash, key| hash[key] = [] } # [ruby series, profiler] => [cpu_s per round]
      @random = Random.new(1)
    end

    def run
      Dir.mktmpdir("sonde-cpu-vs-stackprof", File.join(Child::ROOT, "tmp")) do |dir|
        child = Child.new(dir)
        @rounds.times do |round|
          @rubies.each do |ruby|
            PROFILERS.shuffle(random: @random).each do |profiler|
              result = child.run("cpu", profiler: COLUMNS.fetch(profiler), rate: @rate, scale: SCALE, ruby: ruby)
              @runs[[ruby.series, profiler]][round] = result.cpu_s
            end
          end
          $stderr.print "\rround #{round + 1}/#{@rounds}"
        end
        $stderr.puts
        @in_process = @rubies.to_h { |ruby| [ruby.series, in_process(ruby, dir)] }
      end
      report if @rounds.positive?
      report_in_process
    end

    private

    def report
      puts "cpu workload, #{@rate} Hz, #{@rounds} interleaved rounds (process CPU time, user + sys)"
      @rubies.each do |ruby|
        none = @runs[[ruby.series, "none"]]
        puts
        puts "#{ruby.name} (#{ruby.description})"
        puts format("  %-14s %9s %9s %9s   %s", "profiler", "median", "p25", "min", "paired median (p25-p75)")
        paired = {}
        PROFILERS.each do |profiler|
          cpu = @runs[[ruby.series, profiler]]
          ratios = cpu.zip(none).map { |profiled, base| profiled / base }
          paired[profiler] = ratios
          puts format("  %-14s %8.3fs %8.3fs %8.3fs   %s", profiler, median(cpu), percentile(cpu, 25), cpu.min,
                      profiler == "none" ? "-" : format("%.3f (%.3f-%.3f)", median(ratios), percentile(ratios, 25),
                                                        percentile(ratios, 75)))
        end
        verdict(paired, none)
      end
    end

    def in_process(ruby, dir)
      $stderr.puts "one process, #{ruby.name}: #{@slices} rounds"
      env, command = ruby.command({})
      lib = File.join(dir, "lib")
      script = File.join(__dir__, "cpu_in_process.rb")
      output = IO.popen(env, [*command, "-I", lib, script, @slices.to_s, @rate.to_s, @slice_requests.to_s],
                        chdir: Child::ROOT, err: %i[child out], &:read)
      raise Child::Failure, "cpu_in_process on #{ruby.name} failed:\n#{output}" unless $?.success?

      JSON.parse(output.lines.last)
    end

    def report_in_process
      puts
      puts "In one process: #{@slices} rounds of #{@slice_requests}-request slices, none / sonde / " \
           "stackprof-cpu shuffled in each (bench/cpu_in_process.rb)"
      @rubies.each do |ruby|
        slices = @in_process.fetch(ruby.series).fetch("slices")
        none = slices.fetch("none")
        puts "#{ruby.name}: #{@in_process.fetch(ruby.series).fetch("samples")} samples in all"
        puts format("  %-14s %9s %9s   %-26s %-22s %s", "profiler", "median", "min", "paired process CPU (p25-p75)",
                    "paired main-thread CPU", "other threads' share")
        paired = {}
        PROFILERS.each do |profiler|
          rows = slices.fetch(profiler)
          process = rows.zip(none).map { |(cpu, _), (base, _)| cpu / base }
          thread = rows.zip(none).map { |(_, cpu), (_, base)| cpu / base }
          paired[profiler] = process
          # What the process used beyond the main thread, in the same slice:
          # the profiler's own threads (no noise from the pairing).
          others = rows.map { |cpu, main| (cpu - main) / main }
          puts format("  %-14s %8.4fs %8.4fs   %-26s %-22s %.3f%%", profiler, median(rows.map(&:first)), rows.map(&:first).min,
                      format("%.4f (%.4f-%.4f)", median(process), percentile(process, 25), percentile(process, 75)),
                      format("%.4f", median(thread)), median(others) * 100)
        end
        verdict(paired, none.map(&:first))
      end
    end

    def verdict(paired, none)
      sonde = median(paired["sonde"])
      stackprof = median(paired["stackprof-cpu"])
      difference = (sonde - stackprof) * 100
      spread = (percentile(none, 75) - percentile(none, 25)) / median(none) * 100
      met = difference <= TARGET_POINTS
      aa = median(paired["none (A/A)"])
      puts format("  Sonde - StackProf: %+.2f%% of the unprofiled CPU (target <= +%.1f%%): %s; " \
                  "unprofiled runs' interquartile spread %.1f%%", difference, TARGET_POINTS, met ? "met" : "NOT met",
                  spread)
      puts format("  A/A (none twice, paired): %.4f, %s 1.00 +- %.2f", aa,
                  (aa - 1).abs <= AA_TOLERANCE ? "within" : "NOT within", AA_TOLERANCE)
    end

    def median(values)
      percentile(values, 50)
    end

    def percentile(values, pct)
      sorted = values.sort
      rank = (pct / 100.0) * (sorted.size - 1)
      low = sorted[rank.floor]
      high = sorted[rank.ceil]
      low + (high - low) * (rank - rank.floor)
    end
  end
end

if $PROGRAM_NAME == __FILE__
  rounds = Integer(ARGV[0] || 30)
  rate = Integer(ARGV[1] || 100)
  slices = Integer(ARGV[2] || SondeBench::CpuVersusStackprof::IN_PROCESS_ROUNDS)
  slice_requests = Integer(ARGV[3] || SondeBench::CpuVersusStackprof::SLICE_REQUESTS)
  rubies = SondeBench::RubyTarget.for(ENV.fetch("SONDE_BENCH_RUBIES", SondeBench::Peers.ruby_series))
  missing = rubies.reject(&:available?)
  abort missing.map(&:reason).join("\n") unless missing.empty?
  SondeBench::CpuVersusStackprof.new(rounds: rounds, rate: rate, rubies: rubies, slices: slices,
                                     slice_requests: slice_requests).run
end
