# frozen_string_literal: true

# The benchmark runner: `ruby bench/run.rb` (full, writes bench/RESULTS.md),
# `ruby bench/run.rb --smoke` (tiny, writes tmp/bench/RESULTS.smoke.md) or
# `ruby bench/run.rb --accuracy` (the accuracy section alone, writes
# tmp/bench/RESULTS.accuracy.md) or `ruby bench/run.rb --cost` (the cost of
# a sampling pass alone, writes tmp/bench/RESULTS.cost.md);
# SONDE_BENCH_RESULTS=PATH writes the report
# there instead (settings.rb). Measures Sonde's overhead, sampling cost and
# accuracy side by side with the peer profilers (StackProf, and Datadog,
# Vernier and pf2 where install_peers.rb installed them), on this machine's
# Ruby and on Ruby 3.3 (script/ruby33), prints the markdown report and
# writes it. Exits 1 when anything breaks (a workload crashes or hangs, a
# profile comes back empty).
require "fileutils"
require "tmpdir"
require_relative "support/settings"
require_relative "support/measurements"
require_relative "support/accuracy"
require_relative "support/self_profile"
require_relative "support/report"

module SondeBench
  # Children's files live under the project's tmp/, which the 3.3 chroot sees.
  SCRATCH = File.expand_path("../tmp/bench", __dir__)

  def self.run(smoke:, accuracy_only:, cost_only:)
    settings = SondeBench.settings(smoke: smoke, accuracy_only: accuracy_only, cost_only: cost_only)
    started = Time.now
    clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    log = lambda do |message|
      warn format("[bench %6.1fs] %s", Process.clock_gettime(Process::CLOCK_MONOTONIC) - clock, message)
    end
    FileUtils.mkdir_p(SCRATCH)
    Dir.mktmpdir("run-", SCRATCH) do |dir|
      child = Child.new(dir)
      rubies = RubyTarget.for(settings.rubies)
      lineup = Lineup.new(rubies)
      log_lineup(log, rubies, lineup)
      if cost_only
        sections = { sample_cost: SampleCost.new(child, settings, log, rubies).measure, accuracy: nil }
      else
        sections = accuracy_only ? {} : measure_overhead_and_cost(child, settings, log, lineup, dir)
        sections[:accuracy] = Accuracy.new(child, settings, log, lineup, dir).measure
      end
      markdown = Report.new(settings: settings, rubies: rubies, lineup: lineup, started: started, finished: Time.now,
                            **sections).to_markdown
      puts markdown
      FileUtils.mkdir_p(File.dirname(settings.results))
      File.write(settings.results, markdown)
      log.call("wrote #{settings.results}")
    end
    true
  rescue Child::Failure => e
    warn "bench: FAILED: #{e.message}"
    false
  end

  def self.measure_overhead_and_cost(child, settings, log, lineup, dir)
    overhead = Overhead.new(child, settings, log, lineup).measure
    gc_hook = GcHook.new(child, settings, log).measure
    labels = LabelsCost.new(child, settings, log, lineup.rubies).measure
    cost = SampleCost.new(child, settings, log, lineup.rubies).measure
    long = LongRun.new(child, settings, log).measure
    self_profile = settings.self_profile ? SelfProfile.run(child, scale: settings.self_profile_scale, dir: dir) : nil
    log.call("profile of the profiler: #{self_profile&.available ? "done" : self_profile&.reason || "skipped"}")
    { overhead: overhead, gc_hook: gc_hook, labels: labels, sample_cost: cost, long_run: long,
      self_profile: self_profile }
  end

  # Says up front what will run, and what will not and why (CI's log shows it).
  def self.log_lineup(log, rubies, lineup)
    rubies.each do |ruby|
      unless ruby.available?
        log.call("#{ruby.name}: not available: #{ruby.reason}")
        next
      end
      log.call("#{ruby.name}: #{lineup.profilers(ruby.series).join(", ")}")
      lineup.unavailable[ruby.series].each do |profiler, reason|
        log.call("#{ruby.name}: #{profiler} skipped, not available: #{reason}")
      end
    end
  end
end

exit(SondeBench.run(smoke: ARGV.include?("--smoke"), accuracy_only: ARGV.include?("--accuracy"),
                    cost_only: ARGV.include?("--cost")) ? 0 : 1) if
  $PROGRAM_NAME == __FILE__
