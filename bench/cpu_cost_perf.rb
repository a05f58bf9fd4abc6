# frozen_string_literal: true

# What each profiler's sampling costs the cpu workload, counted rather than
# timed: the workload runs under `perf record` (the kernel's CPU clock, every
# thread, kernel stacks included) once per profiler and rate, and a perf
# sample is the profiler's cost when it ran
#
#   - in the profiler's native code (its library anywhere on the stack:
#     signal handler, postponed job, sampling pass, and whatever Ruby or
#     libc code those called),
#   - on one of the profiler's own threads (Sonde's sonde-* threads), or
#   - in the kernel delivering or returning from a signal, or firing the
#     CPU timers that send them (the same kernel functions for StackProf's
#     ITIMER_PROF and Sonde's per-thread timers).
#
# Timing whole runs on this machine moves by more than the 0.5% the target
# is about (bench/RESULTS.md's A/A rows); a count of where the CPU went
# does not depend on how fast the machine was at the time. It leaves out
# what a profiler does to the rest of the program (caches, an allocation
# slow path), which the timed benchmarks see.
#
#   ruby bench/cpu_cost_perf.rb [REPEATS]     (rake bench:cpu_perf)
#
# Prints a Markdown table per rate: each profiler's share of the process's
# CPU samples, median over REPEATS runs (default 3), and Sonde's minus
# StackProf's against the +0.5% target at 100 Hz.
require "open3"
require "tmpdir"
require_relative "support/child"
require_relative "support/rubies"
require_relative "support/self_profile"

module SondeBench
  class CpuCostPerf
    PERF_FREQUENCY_HZ = 4000
    PERF_BUFFER_PAGES = 4096
    # DWARF unwinding: Debian's Ruby and the profilers' libraries are built
    # without frame pointers, and the user part of a stack must reach the
    # profiler's library from whatever Ruby or libc function it called.
    CALL_GRAPH = "dwarf,8192"
    PROFILERS = {
      "sonde" => { library: /sonde_native/, thread: /\Asonde-/ },
      "stackprof-cpu" => { library: /stackprof\.so/, thread: nil }
    }.freeze
    # Kernel functions of signal delivery and of the CPU timers that send
    # the signals, on the thread they interrupt.
    KERNEL_SIGNAL = /\A(arch_do_signal_or_restart|get_signal|handle_signal|x64_setup_rt_frame|__setup_rt_frame|
                      __x64_sys_rt_sigreturn|restore_sigcontext|run_posix_cpu_timers|handle_posix_cpu_timers|
                      posix_timer_event|send_sigqueue|__send_signal_locked|__send_signal|complete_signal|
                      signal_wake_up_state|cpu_timer_fire)\z/x.freeze
    SIGNAL_TRAMPOLINE = /\A__restore_rt\z/.freeze
    TARGET_POINTS = 0.5
    RATES = [100, 1000].freeze
    SCALE = 3.0

    def initialize(repeats:)
      @repeats = repeats
      @shares = Hash.new { |hash, key| hash[key] = [] }
    end

    def run
      abort "perf is not installed (apt-get install linux-perf)" unless perf_available?
      Dir.mktmpdir("sonde-cpu-cost-perf", File.join(Child::ROOT, "tmp")) do |dir|
        child = Child.new(dir)
        random = Random.new(1)
        @repeats.times do |repeat|
          RATES.product(PROFILERS.keys).shuffle(random: random).each do |rate, profiler|
            @shares[[profiler, rate]] << measure(child, dir, profiler, rate)
          end
          $stderr.print "\rrepeat #{repeat + 1}/#{@repeats}"
        end
        $stderr.puts
      end
      report
    end

    private

    def perf_available?
      _out, _err, status = Open3.capture3("perf", "--version")
      status.success?
    rescue SystemCallError
      false
    end

    # One run: the profiler's share of the process's perf samples, split
    # into [in its code or threads, in the kernel's signal delivery].
    def measure(child, dir, profiler, rate)
      data = File.join(dir, "cost.perf.data")
      perf = ["perf", "record", "-q", "-e", "cpu-clock", "-F", PERF_FREQUENCY_HZ.to_s, "-m", PERF_BUFFER_PAGES.to_s,
              "--call-graph", CALL_GRAPH, "-o", data, "--"]
      result = child.run("cpu", profiler: profiler, rate: rate, scale: SCALE, prefix: perf)
      script, err, status = Open3.capture3("perf", "script", "-i", data, "--no-inline", "-F", "comm,tid,ip,sym,dso")
      raise Child::Failure, "perf script failed: #{err.lines.last}" unless status.success?

      count(script, PROFILERS.fetch(profiler)).merge(taken: samples_taken(profiler, result.hook), cpu_s: result.cpu_s)
    ensure
      File.delete(data) if data && File.exist?(data)
    end

    # What the profiler took for that cost: Sonde's CPU samples (one per
    # interval of a thread's CPU clock) and sampling passes (one per wall
    # tick, every thread), StackProf's samples (one per ITIMER_PROF signal).
    def samples_taken(profiler, hook)
      return { samples: hook.fetch("samples") } unless profiler == "sonde"

      stats = hook.fetch("stats")
      { cpu_samples: stats.fetch("cpu_samples"), passes: stats.fetch("samples") }
    end

    def count(script, profiler)
      total = 0
      own = 0
      kernel = 0
      SelfProfile.each_sample(script) do |thread_name, frames|
        total += 1
        if (profiler[:thread] && thread_name.match?(profiler[:thread])) ||
           frames.any? { |_name, dso| dso.match?(profiler[:library]) }
          own += 1
        elsif frames.any? { |name, _dso| name.match?(KERNEL_SIGNAL) || name.match?(SIGNAL_TRAMPOLINE) }
          kernel += 1
        end
      end
      raise Child::Failure, "perf recorded no samples" if total.zero?

      { own: own.fdiv(total), kernel: kernel.fdiv(total), samples: total }
    end

    def report
      puts "cpu workload (scale #{SCALE}), #{@repeats} run(s) per profiler and rate, under `perf record -e cpu-clock " \
           "-F #{PERF_FREQUENCY_HZ} --call-graph #{CALL_GRAPH}`; shares of the process's CPU samples, median over runs"
      RATES.each do |rate|
        puts
        puts "| #{rate} Hz | in its code or threads | in the kernel's signal delivery | total (each run) | " \
             "perf samples per run | what it took, per CPU second |"
        puts "|---|---|---|---|---|---|"
        totals = PROFILERS.keys.to_h do |profiler|
          runs = @shares[[profiler, rate]]
          total = median(runs.map { |run| run[:own] + run[:kernel] })
          puts format("| %s | %.2f%% | %.2f%% | %.2f%% (%s) | %d | %s |", profiler, median(runs.map { |run| run[:own] }) * 100,
                      median(runs.map { |run| run[:kernel] }) * 100, total * 100,
                      runs.map { |run| format("%.2f", (run[:own] + run[:kernel]) * 100) }.join(", "),
                      median(runs.map { |run| run[:samples] }), taken_text(runs))
          [profiler, total]
        end
        difference = (totals.fetch("sonde") - totals.fetch("stackprof-cpu")) * 100
        verdict = rate == 100 ? (difference <= TARGET_POINTS ? "met" : "NOT met") : "for reference"
        puts
        puts format("Sonde - StackProf at %d Hz: %+.2f%% of the process's CPU (target <= +%.1f%% at 100 Hz): %s",
                    rate, difference, TARGET_POINTS, verdict)
      end
    end

    def taken_text(runs)
      runs.first[:taken].keys.map do |kind|
        format("%.0f %s", median(runs.map { |run| run[:taken].fetch(kind) / run[:cpu_s] }), kind.to_s.tr("_", " "))
      end.join(", ")
    end

    def median(values)
      sorted = values.sort
      middle = sorted.size / 2
      sorted.size.odd? ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0
    end
  end
end

SondeBench::CpuCostPerf.new(repeats: Integer(ARGV.fetch(0, "3"))).run if $PROGRAM_NAME == __FILE__
