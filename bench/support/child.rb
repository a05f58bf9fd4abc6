# frozen_string_literal: true

# Runs one workload in its own Ruby process under one profiler (each
# configuration needs a fresh process: StackProf leaves its SIGPROF handler
# installed, and Sonde will not start over it), on one Ruby (rubies.rb), and
# returns what the workload and the profiler hook reported. Anything
# unexpected (a crash, a hang, a missing result, an empty profile) raises
# Child::Failure, so a broken benchmark fails loudly instead of printing a
# table of nothing.
#
# Children load Sonde from a copy of lib/ (native builds included) taken when
# the benchmark starts: every run measures the same build, and a rebuild
# meanwhile (`rake compile` copies the .so over the old one in place, which
# crashes a process that has it loaded) cannot break or change a run. The
# copy is under the project's tmp/, which the Ruby 3.3 chroot sees too.
require "fileutils"
require "json"
require "rbconfig"
require_relative "workload"
require_relative "rubies"

module SondeBench
  class Child
    class Failure < StandardError; end

    ROOT = File.expand_path("../..", __dir__)
    HOOK = File.join(__dir__, "profiler_hook.rb")
    WORKLOADS = File.expand_path("../workloads", __dir__)
    # A run longer than its expected length by this much is hung.
    TIMEOUT_MARGIN_S = 120
    TIMEOUT_PER_SCALE_S = 60
    # A run that asked for this many samples (rate x duration) and got none is broken.
    SAMPLES_EXPECTED = 10
    EXCERPT_LINES = 15
    RUBY_BUG = "[BUG]"
    # A C backtrace line in Sonde's native library, named by its function.
    SONDE_FRAME = /sonde_native\S*\.so\(\w/.freeze

    # One finished run: the workload's line and the hook's line, merged.
    Run = Struct.new(:workload, :ruby, :profiler, :rate, :elapsed_s, :cpu_s, :details, :hook, keyword_init: true) do
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

    # Runs workload (a file name in bench/workloads without .rb) on ruby (a
    # RubyTarget). seconds: run for that long instead of a fixed amount of
    # work; env: more variables for the workload; prefix: a command to run
    # Ruby under (on 3.3 it runs script/ruby33 and, below it, the chroot's
    # Ruby); profile_out: where the profiler writes its profile.
    def run(workload, profiler:, rate:, scale:, ruby: RubyTarget.host, seconds: nil, env: {}, prefix: [], profile_out: nil)
      child_env = { "SONDE_BENCH_SCALE" => scale.to_s, "SONDE_BENCH_SECONDS" => seconds.to_s }.merge(env)
      output, hook = spawn_child(File.join(WORKLOADS, "#{workload}.rb"), [], profiler: profiler, rate: rate, ruby: ruby,
                                                                              env: child_env, prefix: prefix,
                                                                              profile_out: profile_out,
                                                                              timeout: timeout(scale, seconds),
                                                                              what: "#{workload} (#{ruby.name}, #{Child.label(profiler, rate)})")
      run = parse(workload, ruby, profiler, rate, output, hook)
      check_profile(run)
      run
    end

    # Runs a script that prints its own facts as its last JSON line (the
    # accuracy workloads in test/workloads), under the profiler hook.
    # Returns [facts, hook].
    def run_script(script, args, profiler:, rate:, ruby:, timeout_s:, profile_out:)
      output, hook = spawn_child(script, args, profiler: profiler, rate: rate, ruby: ruby, env: {}, prefix: [],
                                               profile_out: profile_out, timeout: TIMEOUT_MARGIN_S + timeout_s,
                                               what: "#{File.basename(script)} (#{ruby.name}, #{Child.label(profiler, rate)})")
      line = output.lines.reverse.find { |l| l.start_with?("{") }
      raise Failure, "#{script} printed no JSON line:\n#{output.lines.last(15).join}" unless line

      [JSON.parse(line), hook]
    end

    private

    # Returns [the child's output, the hook's JSON line parsed].
    def spawn_child(script, args, profiler:, rate:, ruby:, env:, prefix:, profile_out:, timeout:, what:)
      @counter += 1
      out = File.join(@dir, "hook-#{@counter}.jsonl")
      log = File.join(@dir, "child-#{@counter}.log")
      child_env = { "SONDE_BENCH_PROFILER" => profiler, "SONDE_BENCH_RATE" => rate.to_s, "SONDE_BENCH_OUT" => out,
                    "SONDE_BENCH_PROFILE_OUT" => profile_out.to_s }.merge(ruby.peer_env(profiler)).merge(env)
      spawn_env, ruby_command = ruby.command(child_env)
      command = [*prefix, *ruby_command, "-I", @lib, "-r", HOOK, script, *args]
      wait(Process.spawn(spawn_env, *command, out: log, err: %i[child out], chdir: ROOT), timeout, what, log)
      output = File.read(log)
      raise Failure, "#{what}: the profiler hook wrote nothing:\n#{output.lines.last(15).join}" unless File.exist?(out)

      [output, JSON.parse(File.read(out).lines.last)]
    ensure
      [out, log].each { |path| File.delete(path) if path && File.exist?(path) }
    end

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

      raise Failure, "#{what} failed (#{status}):\n#{excerpt(File.read(log))}"
    end

    # What a failed child's output says: for a crash, Ruby's [BUG] line and
    # the C backtrace's frames in Sonde's code (the tail of a crash report
    # is the memory map, which says nothing); otherwise its last lines.
    def excerpt(output)
      lines = output.lines
      bug = lines.index { |line| line.include?(RUBY_BUG) }
      return lines.last(EXCERPT_LINES).join unless bug

      [lines[bug], *lines.grep(SONDE_FRAME).first(EXCERPT_LINES)].join
    end

    def parse(workload, ruby, profiler, rate, output, hook)
      line = output.lines.find { |l| l.start_with?(RESULT_PREFIX) }
      raise Failure, "#{workload} printed no result line:\n#{output.lines.last(15).join}" unless line

      result = JSON.parse(line.delete_prefix(RESULT_PREFIX))
      Run.new(workload: workload, ruby: ruby.series, profiler: profiler, rate: rate, elapsed_s: result.fetch("elapsed_s"),
              cpu_s: result.fetch("cpu_s"), details: result.fetch("details", {}), hook: hook)
    end

    # An empty profile means the hook measured a profiler that did nothing.
    # Any profiler, Sonde too, may take none in a run too short to ask for
    # any (the smoke run's alloc workload at 100 Hz: about 15 ms, no wall
    # sample in 4 of 8 runs before the idle change and 6 of 8 after).
    def check_profile(run)
      return if run.profiler == "none"

      what = "#{run.workload} (Ruby #{run.ruby}, #{run.label})"
      long_enough = run.rate * run.hook.fetch("profile_duration_s", 0) >= SAMPLES_EXPECTED
      if run.profiler == "sonde"
        raise Failure, "#{what}: the profile is empty" if run.hook.fetch("wall_samples", 0).zero? && long_enough
        raise Failure, "#{what}: no pprof bytes" unless run.hook.fetch("pprof_bytes", 0).positive?
      elsif run.hook.fetch("samples", 0).zero? && long_enough
        raise Failure, "#{what}: the profiler took no sample in #{run.hook.fetch("profile_duration_s").round(2)} s"
      end
    end
  end
end
