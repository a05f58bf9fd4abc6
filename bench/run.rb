# frozen_string_literal: true

# The benchmark runner: `ruby bench/run.rb` (full, writes bench/RESULTS.md)
# or `ruby bench/run.rb --smoke` (tiny, writes tmp/bench/RESULTS.smoke.md);
# SONDE_BENCH_RESULTS=PATH writes the report there instead (settings.rb).
# Measures Sonde's overhead and sampling cost side by side with StackProf,
# prints the markdown report and writes it. Exits 1 when anything breaks (a
# workload crashes or hangs, a profile comes back empty).
require "fileutils"
require "tmpdir"
require_relative "support/settings"
require_relative "support/measurements"
require_relative "support/self_profile"
require_relative "support/report"

module SondeBench
  def self.run(smoke:)
    settings = SondeBench.settings(smoke: smoke)
    started = Time.now
    clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    log = lambda do |message|
      warn format("[bench %6.1fs] %s", Process.clock_gettime(Process::CLOCK_MONOTONIC) - clock, message)
    end
    Dir.mktmpdir("sonde-bench") do |dir|
      child = Child.new(dir)
      overhead = Overhead.new(child, settings, log).measure
      gc_hook = GcHook.new(child, settings, log).measure
      cost = SampleCost.new(child, settings, log).measure
      long = LongRun.new(child, settings, log).measure
      self_profile = settings.self_profile ? SelfProfile.run(child, scale: settings.self_profile_scale, dir: dir) : nil
      log.call("profile of the profiler: #{self_profile&.available ? "done" : self_profile&.reason || "skipped"}")
      markdown = Report.new(settings: settings, overhead: overhead, gc_hook: gc_hook, sample_cost: cost, long_run: long,
                            self_profile: self_profile, started: started, finished: Time.now).to_markdown
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
end

exit(SondeBench.run(smoke: ARGV.include?("--smoke")) ? 0 : 1) if $PROGRAM_NAME == __FILE__
