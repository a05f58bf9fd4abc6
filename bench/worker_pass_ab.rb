# frozen_string_literal: true

# What a change does to the Rails-worker pass, measured where this
# machine's noise cannot hide it: two checkouts of Sonde (each built for
# the Rubies asked, `rake compile` and `script/ruby 3.x rake compile` in
# it), the same workload (bench/workloads/puma_worker.rb, 100 Hz) run
# under each in turn, the order swapped every round, on every Ruby asked.
# Pass times move by a third from one hour to the next here; a ratio taken
# within a round does not.
#
#   ruby bench/worker_pass_ab.rb BEFORE_DIR AFTER_DIR [ROUNDS] [SECONDS] [RUBIES]
#
# ROUNDS (6) rounds of SECONDS (8) s runs; RUBIES "host,3.3,3.4" (3.3 and
# 3.4 through each checkout's own script/ruby, which mounts that
# checkout). Each checkout runs its own bench/support/profiler_hook.rb, so
# both must have it. Prints each round's pass averages and medians, then
# the median after/before ratio per Ruby.
require "fileutils"
require "json"
require "open3"
require "tmpdir"
require_relative "support/summary"

module WorkerPassAB
  WORKLOAD = "bench/workloads/puma_worker.rb"
  HOOK = "./bench/support/profiler_hook"
  RATE_HZ = 100

  module_function

  def run(before, after, rounds, seconds, rubies)
    results = Hash.new { |hash, key| hash[key] = [] }
    rounds.times do |round|
      rubies.each do |ruby|
        pair = { before: before, after: after }.to_a
        pair.reverse! if round.odd?
        stats = pair.to_h { |side, dir| [side, measure(dir, ruby, seconds)] }
        results[ruby] << stats
        puts format("round %d %-4s before avg %6.1f us | after avg %6.1f us, median %s", round + 1, ruby,
                    stats[:before]["sampling_time_ns_avg"] / 1e3, stats[:after]["sampling_time_ns_avg"] / 1e3,
                    median_of(stats[:after]))
      end
    end
    puts
    results.each do |ruby, rows|
      ratios = SondeBench::Summary.of(rows.map { |s| s[:after]["sampling_time_ns_avg"].to_f / s[:before]["sampling_time_ns_avg"] })
      puts format("%-4s after/before pass average: median %.3f (%.3f-%.3f) over %d rounds", ruby, ratios.median,
                  ratios.min, ratios.max, ratios.count)
    end
  end

  def median_of(stats)
    p50 = stats["sampling_time_ns_p50"]
    p50 ? format("%.1f us", p50 / 1e3) : "not kept by this build"
  end

  # The hook's stats of one run of the workload under dir's Sonde.
  def measure(dir, ruby, seconds)
    # Under the checkout's tmp/: its chroots see that checkout only.
    FileUtils.mkdir_p(File.join(dir, "tmp"))
    Dir.mktmpdir("ab-", File.join(dir, "tmp")) do |scratch|
      out = File.join(scratch, "hook.json")
      env = { "SONDE_BENCH_PROFILER" => "sonde", "SONDE_BENCH_RATE" => RATE_HZ.to_s, "SONDE_BENCH_OUT" => out,
              "SONDE_BENCH_PROFILE_OUT" => "", "SONDE_BENCH_SECONDS" => seconds.to_s }
      prefix = ruby == "host" ? [] : [File.join(dir, "script", "ruby"), ruby]
      _output, status = Open3.capture2e(env, *prefix, "ruby", "-I", "lib", "-r", HOOK, WORKLOAD, chdir: dir)
      abort "#{WORKLOAD} failed under #{dir} (#{ruby}): #{status}" unless status.success?
      JSON.parse(File.read(out).lines.last).fetch("stats")
    end
  end
end

if $PROGRAM_NAME == __FILE__
  abort "usage: ruby bench/worker_pass_ab.rb BEFORE_DIR AFTER_DIR [ROUNDS] [SECONDS] [RUBIES]" unless ARGV.size >= 2
  before, after = ARGV[0, 2].map { |dir| File.expand_path(dir) }
  [before, after].each { |dir| abort "#{dir}: no #{WorkerPassAB::WORKLOAD} there" unless File.exist?(File.join(dir, WorkerPassAB::WORKLOAD)) }
  WorkerPassAB.run(before, after, Integer(ARGV.fetch(2, "6")), Float(ARGV.fetch(3, "8")),
                   ARGV.fetch(4, "host,3.3,3.4").split(","))
end
