# frozen_string_literal: true

# Runs one workload in its own Ruby process under one profiler (each
# configuration needs a fresh process: StackProf leaves its SIGPROF handler
# installed, and Sonde will not start over it), and returns what the
# workload and the profiler hook reported. Anything unexpected (a crash, a
# hang, a missing result, an empty profile) raises Child::Failure, so a
# broken benchmark fails loudly instead of printing a table of nothing.
#
# Children load Sonde from a copy of lib/ (native build included) taken when
# the benchmark starts: every run measures the same build, and a rebuild
# meanwhile (`rake compile` copies the .so over the old one in place, which
# crashes a process that has it loaded) cannot break or change a run.
require "fileutils"
require "json"
require "rbconfig"
require "tmpdir"
require_relative "workload"

module SondeBench
  class Child
    class Failure < StandardError; end

    ROOT = File.expand_path("../..", __dir__)
    HOOK = File.join(__dir__, "profiler_hook.rb")
    WORKLOADS = File.expand_path("../workloads", __dir__)
    # A run longer than its expected length by this much is hung.
    TIMEOUT_MARGIN_S = 120
    TIMEOUT_PER_SCALE_S = 60

    # One finished run: the workload's line and the hook's line, merged.
    Run = Struct.new(:workload, :profiler, :rate, :elapsed_s, :cpu_s, :details, :hook, keyword_init: true) do
      def label
        Child.label(profiler, rate)
      end
    end

    def self.label(profiler, rate)
      profiler == "none" ? "none" : "#{profiler} #{rate} Hz"
    end

    def initialize(dir)
      @dir = dir
      @counter = 0
      @lib = File.join(dir, "lib")
      FileUtils.cp_r(File.join(ROOT, "lib"), @lib)
    end

    # Runs workload (a file name in bench/workloads without .rb). seconds:
    # run for that long instead of a fixed amount of work; env: more
    # variables for the workload; prefix: a command to run Ruby under.
    def run(workload, profiler:, rate:, scale:, seconds: nil, env: {}, prefix: [], pprof: nil)
      @counter += 1
      out = File.join(@dir, "hook-#{@counter}.jsonl")
      log = File.join(@dir, "child-#{@counter}.log")
      child_env = { "SONDE_BENCH_PROFILER" => profiler, "SONDE_BENCH_RATE" => rate.to_s,
                    "SONDE_BENCH_SCALE" => scale.to_s, "SONDE_BENCH_SECONDS" => seconds.to_s,
                    "SONDE_BENCH_OUT" => out, "SONDE_BENCH_PPROF" => pprof.to_s }.merge(env)
      command = [*prefix, RbConfig.ruby, "-I", @lib, "-r", HOOK,
                 File.join(WORKLOADS, "#{workload}.rb")]
      wait(Process.spawn(child_env, *command, out: log, err: %i[child out], chdir: ROOT),
           timeout(scale, seconds), "#{workload} (#{Child.label(profiler, rate)})", log)
      parse(workload, profiler, rate, File.read(log), out)
    ensure
      [out, log].each { |path| File.delete(path) if path && File.exist?(path) }
    end

    private

    def timeout(scale, seconds)
      TIMEOUT_MARGIN_S + (seconds || (scale * TIMEOUT_PER_SCALE_S))
    end

    def wait(pid, timeout, what, log)
      waiter = Process.detach(pid)
      unless waiter.join(timeout)
        Process.kill("KILL", pid)
        waiter.join
        raise Failure, "#{what} did not finish within #{timeout.round} s"
      end
      status = waiter.value
      return if status.success?

      raise Failure, "#{what} failed (#{status}):\n#{File.read(log).lines.last(15).join}"
    end

    def parse(workload, profiler, rate, output, hook_path)
      line = output.lines.find { |l| l.start_with?(RESULT_PREFIX) }
      raise Failure, "#{workload} printed no result line:\n#{output.lines.last(15).join}" unless line

      result = JSON.parse(line.delete_prefix(RESULT_PREFIX))
      raise Failure, "#{workload}: the profiler hook wrote nothing" unless File.exist?(hook_path)

      hook = JSON.parse(File.read(hook_path).lines.last)
      run = Run.new(workload: workload, profiler: profiler, rate: rate, elapsed_s: result.fetch("elapsed_s"),
                    cpu_s: result.fetch("cpu_s"), details: result.fetch("details", {}), hook: hook)
      check_profile(run)
      run
    end

    def check_profile(run)
      return unless run.profiler == "sonde"

      samples = run.hook.fetch("wall_samples", 0)
      raise Failure, "#{run.workload} (#{run.label}): the profile is empty" if samples.zero?
      raise Failure, "#{run.workload} (#{run.label}): no pprof bytes" unless run.hook.fetch("pprof_bytes", 0).positive?
    end
  end
end
