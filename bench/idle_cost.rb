# frozen_string_literal: true

# What an idle process costs: a process whose main thread and N more
# threads sleep, with no profiler, with Sonde at 100 Hz (cpu and wall, the
# default), and with StackProf's wall mode at 100 Hz where it is installed
# (Debian's ruby-stackprof). Most of a fleet waits (Puma and Sidekiq
# threads in IO.select, Queue#pop, sleep): this is what it pays for
# profiling while it does.
#
#   ruby bench/idle_cost.rb [ROUNDS] [SECONDS]   (rake bench:idle; ROUNDS=5, SECONDS=4)
#   script/ruby 3.4 ruby bench/idle_cost.rb      on another Ruby (after script/ruby 3.4 rake compile)
#
# Each child starts its threads and the profiler, lets half a second pass
# (start-up is bench/startup_cost.rb's question), then reads its own
# process CPU clock (user + sys of every thread, the profiler's own
# included) over SECONDS of wall time. Each round runs every (threads,
# profiler) pair once, in a shuffled order; printed are the median over
# rounds of CPU per wall second, with the lowest and highest, and for Sonde
# its passes (samples) per second over the window. Writes a markdown table
# to stdout and to bench/IDLE_RESULTS.md (or $SONDE_BENCH_IDLE_RESULTS).
require "json"
require "open3"
require "rbconfig"

module SondeBench
  class IdleCost
    ROOT = File.expand_path("..", __dir__)
    LIB = File.join(ROOT, "lib")
    THREAD_COUNTS = [0, 8, 32, 128].freeze
    RATE = 100
    WARMUP_SECONDS = 0.5

    PROFILERS = {
      "none" => { setup: "", start: "", stop: "" },
      "Sonde" => {
        setup: "require 'sonde'",
        start: "Sonde.start(rate: #{RATE})",
        stop: "stats = Sonde.stats; Sonde.stop; passes = stats[:samples]",
      },
      "StackProf wall" => {
        setup: "require 'stackprof'",
        start: "StackProf.start(mode: :wall, interval: #{1_000_000 / RATE})",
        stop: "StackProf.stop",
      },
    }.freeze

    def initialize(rounds:, seconds:)
      @rounds = rounds
      @seconds = seconds
      @random = Random.new(1)
      @results = Hash.new { |hash, key| hash[key] = [] }
    end

    def run
      profilers = PROFILERS.select { |name, _| available?(name) }
      pairs = THREAD_COUNTS.product(profilers.keys)
      @rounds.times do |round|
        pairs.shuffle(random: @random).each { |threads, profiler| @results[[threads, profiler]] << child(threads, profiler) }
        $stderr.print "\rround #{round + 1}/#{@rounds}"
      end
      $stderr.puts
      report(profilers.keys, PROFILERS.keys - profilers.keys)
    end

    private

    def available?(profiler)
      _out, _err, status = Open3.capture3(RbConfig.ruby, "-I#{LIB}", "-e", PROFILERS.fetch(profiler)[:setup])
      status.success?
    end

    def script(threads, profiler)
      parts = PROFILERS.fetch(profiler)
      <<~RUBY
        #{parts[:setup]}
        passes = nil
        ready = Queue.new
        sleepers = Array.new(#{threads}) { Thread.new { ready << true; sleep } }
        #{threads}.times { ready.pop }
        #{parts[:start]}
        sleep #{WARMUP_SECONDS}
        wall = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
        before = defined?(Sonde) && Sonde.running? ? Sonde.stats[:samples] : nil
        sleep #{@seconds}
        cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu
        wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall
        #{parts[:stop]}
        puts JSON.generate("cpu" => cpu, "wall" => wall, "passes" => passes && before && passes - before)
      RUBY
    end

    def child(threads, profiler)
      stdout, stderr, status = Open3.capture3(RbConfig.ruby, "-I#{LIB}", "-rjson", "-e", script(threads, profiler))
      raise "#{profiler} with #{threads} threads failed: #{stderr}" unless status.success?

      facts = JSON.parse(stdout.lines.last)
      { share: facts["cpu"] / facts["wall"], passes_per_second: facts["passes"]&.fdiv(facts["wall"]) }
    end

    def median(values)
      sorted = values.sort
      middle = sorted.size / 2
      sorted.size.odd? ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0
    end

    def percent(share) = format("%.3f%%", share * 100)

    def cell(runs)
      shares = runs.map { |run| run[:share] }
      "#{percent(median(shares))} (#{percent(shares.min)}-#{percent(shares.max)})"
    end

    # script/ruby's chroots have no git.
    def commit
      out = `git -C #{ROOT} rev-parse --short HEAD 2>/dev/null`.strip
      out.empty? ? "unknown (no git here)" : out
    rescue SystemCallError
      "unknown (no git here)"
    end

    def report(profilers, missing)
      lines = []
      lines << "# What an idle process costs"
      lines << ""
      lines << "Written by `rake bench:idle` (bench/idle_cost.rb) on #{Time.now.utc.strftime("%Y-%m-%d %H:%M")} UTC, " \
               "#{RUBY_DESCRIPTION}, Sonde at commit #{commit}."
      lines << "Process CPU (user + sys, every thread) per wall second of a process whose main thread and N more " \
               "threads sleep, over #{@seconds} s after #{WARMUP_SECONDS} s of start-up; median of #{@rounds} " \
               "interleaved rounds (lowest-highest). Profilers at #{RATE} Hz."
      lines << "Not installed here: #{missing.join(", ")}." unless missing.empty?
      lines << ""
      lines << "| sleeping threads | #{profilers.join(" | ")} | Sonde passes per second |"
      lines << "|---|#{"---|" * profilers.size}---|"
      THREAD_COUNTS.each do |threads|
        cells = profilers.map { |profiler| cell(@results[[threads, profiler]]) }
        passes = @results[[threads, "Sonde"]].filter_map { |run| run[:passes_per_second] }
        lines << "| #{threads} | #{cells.join(" | ")} | #{passes.empty? ? "-" : format("%.1f", median(passes))} |"
      end
      lines.join("\n") + "\n"
    end
  end
end

if $PROGRAM_NAME == __FILE__
  rounds = Integer(ARGV.fetch(0, "5"))
  seconds = Float(ARGV.fetch(1, "4"))
  table = SondeBench::IdleCost.new(rounds: rounds, seconds: seconds).run
  puts table
  path = ENV.fetch("SONDE_BENCH_IDLE_RESULTS", File.join(SondeBench::IdleCost::ROOT, "bench", "IDLE_RESULTS.md"))
  File.write(path, table)
  warn "wrote #{path}"
end
