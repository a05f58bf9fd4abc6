# frozen_string_literal: true

# What the timeline (timeline: true, docs/timeline.md) costs beside the
# aggregate: the entries it logs per second, the process CPU, the size of
# the profile and the time Sonde.stop takes to write it, with the timeline
# on and off. The workload is one thread burning CPU and WAKERS threads
# that wake 20 times a second (a server's threads between requests), at
# 100 Hz, for SECONDS.
#
#   ruby bench/timeline_cost.rb [ROUNDS] [SECONDS] [WAKERS]   (rake bench:timeline; 5, 10, 8)
#
# Each round runs both settings once, in a shuffled order, each in a child
# of its own; printed are medians over rounds with the lowest and highest.
# Process CPU is user + sys of every thread (Sonde's own included) per wall
# second. Writes a markdown table to stdout and to bench/TIMELINE_RESULTS.md
# (or $SONDE_BENCH_TIMELINE_RESULTS).
require "json"
require "open3"
require "rbconfig"
require_relative "support/summary"

module SondeBench
  class TimelineCost
    ROOT = File.expand_path("..", __dir__)
    LIB = File.join(ROOT, "lib")
    RATE = 100

    CHILD = <<~RUBY
      require "json"
      require "sonde"
      seconds, wakers, timeline = Float(ARGV[0]), Integer(ARGV[1]), ARGV[2] == "on"
      Sonde.start(rate: #{RATE}, timeline: timeline)
      wakers.times { Thread.new { loop { sleep 0.05 } } }
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      cpu_before = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
      Thread.new do
        x = 0
        x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < seconds
      end.join
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu_before
      wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      stopping = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      profile = Sonde.stop
      stop_ms = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - stopping) * 1000
      puts JSON.generate(entries_per_s: profile.stats[:timeline_samples] / wall, cpu_share: cpu / wall,
                         bytes: profile.pprof.bytesize, stop_ms: stop_ms)
    RUBY

    def initialize(rounds:, seconds:, wakers:)
      @rounds = rounds
      @seconds = seconds
      @wakers = wakers
    end

    def run
      results = Hash.new { |hash, key| hash[key] = [] }
      @rounds.times do
        %w[on off].shuffle.each { |setting| results[setting] << child(setting) }
      end
      report(results)
    end

    private

    def child(setting)
      stdout, stderr, status = Open3.capture3(RbConfig.ruby, "-I#{LIB}", "-e", CHILD, @seconds.to_s, @wakers.to_s, setting)
      raise "timeline #{setting}: the child failed (#{status.inspect}): #{stderr}" unless status.success?

      JSON.parse(stdout.lines.last)
    end

    def report(results)
      rows = results.sort.reverse.map do |setting, runs|
        cell = ->(key, &format) { Summary.of(runs.map { |run| run.fetch(key) }).to_s(&format) }
        "| #{setting} | #{cell.call("entries_per_s") { |v| v.round.to_s }} | " \
          "#{cell.call("cpu_share") { |v| format("%.3f", v) }} | #{cell.call("bytes") { |v| (v / 1024.0).round(1).to_s }} | " \
          "#{cell.call("stop_ms") { |v| v.round(1).to_s }} |"
      end
      <<~MARKDOWN
        # The timeline's cost

        `ruby bench/timeline_cost.rb #{@rounds} #{@seconds} #{@wakers}` on Ruby #{RUBY_VERSION}: one thread burning
        CPU and #{@wakers} threads waking 20 times a second, #{RATE} Hz, #{@seconds} s; medians over #{@rounds}
        interleaved rounds (lowest–highest).

        | timeline | entries logged per second | process CPU per wall second | profile (KB, gzip'd) | Sonde.stop (ms) |
        |---|---|---|---|---|
        #{rows.join("\n")}

        An entry is 40 bytes of memory until its period is exported.
      MARKDOWN
    end
  end
end

if $PROGRAM_NAME == __FILE__
  rounds, seconds, wakers = ARGV.map(&:to_i)
  table = SondeBench::TimelineCost.new(rounds: rounds || 5, seconds: seconds || 10, wakers: wakers || 8).run
  puts table
  File.write(ENV.fetch("SONDE_BENCH_TIMELINE_RESULTS", File.join(__dir__, "TIMELINE_RESULTS.md")), table)
end
