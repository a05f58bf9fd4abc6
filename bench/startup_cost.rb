# frozen_string_literal: true

# What loading Sonde costs a process that does nothing else, and what it
# does to that process's heap: `ruby -e 1` alone, with `-rsonde` (loaded,
# not started) and as `sonde record` runs it (-rsonde/record: loaded,
# started, stopped and written at exit).
#
#   ruby bench/startup_cost.rb [ROUNDS] [--check]  (rake bench:startup; ROUNDS=40; --check: exit 1 when
#                                                  the target is not met)
#   script/ruby 3.4 ruby bench/startup_cost.rb     on another Ruby (after script/ruby 3.4 rake compile)
#
# CPU: each round runs every variant once, in a shuffled order, and reads
# the child's CPU (user + sys, its every thread) from getrusage; printed
# are the median and quartiles of each variant, and the median over rounds
# of each variant minus `ruby -e 1` of the same round (paired), which is
# what the target (`-rsonde/record` adds at most 0.03 s) is read against.
# "none (A/A)" is `ruby -e 1` again: its paired distance from none is the
# noise.
#
# Heap: one run of each variant reports the heap's live slots after a full
# GC (what loading left on it) and the GCs of an allocation-heavy program.
# Ruby grows its heap when a GC leaves less than a fifth of it free, so the
# objects a library keeps alive can make a program whose live set sits near
# that line collect half as often (test/startup_test.rb compares GC.count
# with and without Sonde).
require "json"
require "rbconfig"
require "tmpdir"
require_relative "../lib/sonde/record"

module SondeBench
  class StartupCost
    ROOT = File.expand_path("..", __dir__)
    LIB = File.join(ROOT, "lib")
    TARGET_SECONDS = 0.03
    # What loading left on the heap: its live slots after a full GC.
    LIVE_SLOTS = "GC.start; GC.start; print GC.stat(:heap_live_slots)"
    # A program whose GC count follows the heap's size (test/startup_test.rb
    # compares it with and without Sonde).
    GC_WORKLOAD = File.join(ROOT, "test", "workloads", "scanner_parse.rb")

    def initialize(rounds:)
      @rounds = rounds
      @random = Random.new(1)
      @cpu = Hash.new { |hash, key| hash[key] = [] }
    end

    def run
      Dir.mktmpdir("sonde-startup") do |dir|
        variants = variants(dir)
        @rounds.times do |round|
          variants.to_a.shuffle(random: @random).each { |name, (env, args)| @cpu[name][round] = child_cpu(env, args) }
          $stderr.print "\rround #{round + 1}/#{@rounds}"
        end
        $stderr.puts
        report_cpu(variants.keys)
        report_heap(variants)
      end
      @met
    end

    private

    # name => [environment, ruby arguments]
    def variants(dir)
      record_env = Sonde::Record.environment(output: File.join(dir, "startup.pprof"), options: {},
                                             parent_pid: Process.pid)
      {
        "none" => [{}, []],
        "none (A/A)" => [{}, []],
        "-rsonde" => [{}, ["-I#{LIB}", "-rsonde"]],
        "-rsonde/record" => [record_env, []],
      }
    end

    def child_cpu(env, args, script = "1")
      before = Process.times
      system(env, RbConfig.ruby, *args, "-e", script, exception: true)
      after = Process.times
      (after.cutime - before.cutime) + (after.cstime - before.cstime)
    end

    def report_cpu(names)
      none = @cpu.fetch("none")
      puts "#{RUBY_DESCRIPTION}"
      puts "`ruby -e 1`, #{@rounds} interleaved rounds: process CPU (user + sys) in ms"
      puts
      puts "| variant | median | p25 | p75 | added, paired median (p25-p75) |"
      puts "|---|---|---|---|---|"
      names.each do |name|
        cpu = @cpu.fetch(name)
        added = cpu.zip(none).map { |variant, base| variant - base }
        paired = name == "none" ? "-" : format("%+.1f (%+.1f to %+.1f)", *[50, 25, 75].map { |p| ms(percentile(added, p)) })
        puts format("| %s | %.1f | %.1f | %.1f | %s |", name, ms(median(cpu)), ms(percentile(cpu, 25)),
                    ms(percentile(cpu, 75)), paired)
      end
      record_added = median(@cpu.fetch("-rsonde/record").zip(none).map { |variant, base| variant - base })
      @met = record_added <= TARGET_SECONDS
      puts
      puts format("-rsonde/record adds %.1f ms of CPU (paired median); target at most %.0f ms: %s",
                  ms(record_added), ms(TARGET_SECONDS), @met ? "met" : "NOT met")
    end

    def report_heap(variants)
      puts
      puts "Heap (one run each): live slots after loading and a full GC; GCs and heap pages of " \
           "test/workloads/scanner_parse.rb (a Ruby JSON parser, mostly allocation)"
      puts
      puts "| variant | live slots | GC.count | GC time (ms) | heap pages at the end |"
      puts "|---|---|---|---|---|"
      variants.each do |name, (env, args)|
        next if name == "none (A/A)"

        live = Integer(IO.popen(env, [RbConfig.ruby, *args, "-e", LIVE_SLOTS], &:read), 10)
        gc = JSON.parse(IO.popen(env, [RbConfig.ruby, *args, GC_WORKLOAD], &:read).lines.last)
        raise "the heap probes failed under #{name}" unless $?.success?

        puts format("| %s | %d | %d | %d | %d |", name, live, *gc.values_at("gc_count", "gc_time_ms", "heap_pages"))
      end
    end

    def ms(seconds)
      seconds * 1000
    end

    def median(values)
      percentile(values, 50)
    end

    def percentile(values, percent)
      sorted = values.sort
      sorted[((sorted.size - 1) * percent / 100.0).round]
    end
  end
end

if $PROGRAM_NAME == __FILE__
  check = ARGV.delete("--check")
  rounds = ARGV.fetch(0, "40")
  unless rounds.match?(/\A\d+\z/) && Integer(rounds, 10) >= 5 && ARGV.size <= 1
    abort "bench/startup_cost.rb: give ROUNDS (an Integer of at least 5, default 40) and optionally --check " \
          "(exit 1 when the target is not met), got #{ARGV.join(" ").inspect}"
  end
  exit(SondeBench::StartupCost.new(rounds: Integer(rounds, 10)).run || !check)
end
