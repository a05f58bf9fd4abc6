# frozen_string_literal: true

# What a forked child costs under continuous mode (a fork-per-job worker:
# Resque, a forking job runner): a parent forks CHILDREN children one after
# another, each doing nothing and exiting normally, so what is measured is
# Sonde's part of a child's life: dropping the parent's run, starting its
# own (trigger, idle helper, flusher and exporter threads), and writing its
# profile at exit.
#
#   ruby bench/fork_cost.rb [ROUNDS] [CHILDREN]   (rake bench:fork; ROUNDS=9 CHILDREN=40)
#   script/ruby 3.4 ruby bench/fork_cost.rb       on another Ruby (after script/ruby 3.4 rake compile)
#
# Each round runs every variant once in a shuffled order, each in a fresh
# parent process, and reads the children's CPU (user + sys, every thread,
# from the parent's Process.times after waiting for them) and the wall time
# per child. Printed: each variant's median over rounds, and its median
# paired difference from "none" of the same round. "none (A/A)" is "none"
# again: its paired distance from none is the noise.
require "json"
require "rbconfig"
require "tmpdir"
require_relative "support/summary"

module SondeBench
  class ForkCost
    ROOT = File.expand_path("..", __dir__)
    LIB = File.join(ROOT, "lib")

    PARENT = <<~RUBY
      children = Integer(ARGV[0])
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      children.times { Process.wait(fork {}) }
      wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      times = Process.times
      puts JSON.generate(wall_ms: wall * 1000 / children, cpu_ms: (times.cutime + times.cstime) * 1000 / children)
    RUBY

    def initialize(rounds:, children:)
      @rounds = rounds
      @children = children
      @random = Random.new(1)
      @results = Hash.new { |hash, key| hash[key] = [] }
    end

    def run
      Dir.mktmpdir("sonde-fork") do |dir|
        variants = variants(dir)
        @rounds.times do
          variants.keys.shuffle(random: @random).each { |name| @results[name] << measure(variants[name]) }
        end
      end
      report
    end

    private

    # name => environment of the parent.
    def variants(dir)
      continuous = { "RUBYOPT" => "-I#{LIB} -rsonde/auto", "SONDE_EXPORT" => "dir:#{File.join(dir, "profiles")}" }
      {
        "none" => {},
        "none (A/A)" => {},
        "Sonde, continuous mode, dir: export" => continuous,
      }
    end

    def measure(env)
      output = IO.popen(env, [RbConfig.ruby, "-rjson", "-e", PARENT, @children.to_s], &:read)
      raise "the parent failed: #{$?.inspect}" unless $?.success?

      JSON.parse(output.lines.last)
    end

    def report
      puts "Ruby #{RUBY_VERSION}: #{@children} children per parent, #{@rounds} rounds, medians (lowest-highest)"
      puts "| variant | CPU per child (ms) | - none, paired (ms) | wall per child (ms) |"
      puts "|---|---|---|---|"
      none = @results["none"]
      @results.each do |name, rows|
        cpu = Summary.of(rows.map { |row| row["cpu_ms"] })
        wall = Summary.of(rows.map { |row| row["wall_ms"] })
        paired = Summary.of(rows.each_index.map { |i| rows[i]["cpu_ms"] - none[i]["cpu_ms"] })
        puts format("| %s | %.2f (%.2f-%.2f) | %+.2f (%+.2f to %+.2f) | %.2f (%.2f-%.2f) |", name, cpu.median, cpu.min,
                    cpu.max, paired.median, paired.min, paired.max, wall.median, wall.min, wall.max)
      end
    end
  end
end

if $PROGRAM_NAME == __FILE__
  SondeBench::ForkCost.new(rounds: Integer(ARGV.fetch(0, "9")), children: Integer(ARGV.fetch(1, "40"))).run
end
