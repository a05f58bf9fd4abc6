# frozen_string_literal: true

# What each profiler's sampling costs the cpu workload, counted rather than
# timed, side by side: Sonde, StackProf's cpu mode, Datadog's profiler, and
# on Ruby 3.3 Vernier and pf2, each started by the benchmark's profiler hook
# with the options bench/RESULTS.md's "Profilers compared" lists. The
# workload runs under `perf record` (the kernel's CPU clock, every thread,
# kernel stacks included) once per Ruby, profiler and rate, and a perf
# sample of the Ruby process is the profiler's cost when it ran
#
#   - in the profiler's native code (its libraries anywhere on the stack:
#     signal handler, postponed job, sampling pass, and whatever Ruby or
#     libc code those called),
#   - on one of the profiler's own threads (by the name Linux gives it), or
#   - in the kernel delivering or returning from a signal, or firing the
#     CPU timers that send them (the same kernel functions for StackProf's
#     ITIMER_PROF and the per-thread timers of Sonde, Datadog and pf2).
#
# The workload is bench/workloads/cpu.rb, at 100 and 1000 Hz. Threads that
# start and end by the thousand are not counted this way: perf's cpu-clock
# sampling gives each thread a period counter of its own, and a thread that
# ends before one period of CPU is never sampled (on Ruby 3.3+, where each
# Ruby thread is a new native thread, perf saw a fifth of such a process's
# CPU). bench/thread_start_cost.rb times them in one process instead.
#
# Timing whole runs on this machine moves by more than the 0.3% the target
# is about (bench/RESULTS.md's A/A rows); a count of where the CPU went
# does not depend on how fast the machine was at the time. It leaves out
# what a profiler does to the rest of the program (caches, an allocation
# slow path), which the timed benchmarks see.
#
#   ruby bench/cpu_cost_perf.rb [REPEATS]   (rake bench:cpu_perf; REPEATS=3)
#   SONDE_BENCH_RUBIES=3.1,3.3 ruby bench/cpu_cost_perf.rb     also on 3.3 (rake bench:cpu_perf does both)
#
# On 3.3 and 3.4 perf runs on the host and records script/ruby and the
# chroot's Ruby below it: perf reads the chroot's libraries through --symfs (a
# folder that mirrors the chroot, with the project's own path, which the
# chroot bind-mounts, pointing at the host's), and only the Ruby process's
# samples count (not the wrapper's shell, chroot or env before it).
#
# Prints a Markdown table per Ruby and rate: each profiler's share of the
# process's CPU samples, median over REPEATS runs, and Sonde's minus
# StackProf's against the +0.3% target at 100 Hz (issue 24).
require "fileutils"
require "open3"
require "tmpdir"
require_relative "support/child"
require_relative "support/rubies"
require_relative "support/self_profile"
require_relative "support/side_by_side"

module SondeBench
  class CpuCostPerf
    include SideBySide

    PERF_FREQUENCY_HZ = 4000
    PERF_BUFFER_PAGES = 4096
    # DWARF unwinding: Debian's Ruby and the profilers' libraries are built
    # without frame pointers, and the user part of a stack must reach the
    # profiler's library from whatever Ruby or libc function it called.
    CALL_GRAPH = "dwarf,8192"
    # Each profiler's shared objects (perf's dso, a path) and the names of
    # the threads it starts (Linux keeps 15 bytes of a name).
    PROFILERS = {
      "sonde" => { library: /sonde_native/, thread: /\Asonde-/ },
      "stackprof-cpu" => { library: /stackprof\.so/, thread: nil },
      "datadog" => { library: /datadog_profiling_native_extension|libdatadog_profiling/, thread: /\ADatadog::/ },
      "vernier" => { library: %r{/vernier\.so\z}, thread: nil },
      "pf2" => { library: %r{/pf2\.so\z}, thread: nil }
    }.freeze
    # Kernel functions of signal delivery and of the CPU timers that send
    # the signals, on the thread they interrupt.
    KERNEL_SIGNAL = /\A(arch_do_signal_or_restart|get_signal|handle_signal|x64_setup_rt_frame|__setup_rt_frame|
                      __x64_sys_rt_sigreturn|restore_sigcontext|run_posix_cpu_timers|handle_posix_cpu_timers|
                      posix_timer_event|send_sigqueue|__send_signal_locked|__send_signal|complete_signal|
                      signal_wake_up_state|cpu_timer_fire)\z/x.freeze
    SIGNAL_TRAMPOLINE = /\A__restore_rt\z/.freeze
    # The Ruby process's main thread; under another name it is a command
    # that ran as that process before it became Ruby (perf's own child,
    # script/ruby33's shell, chroot, env).
    RUBY_MAIN_THREAD = /\Aruby/.freeze
    # Where script/ruby keeps each chroot (its own defaults and variables).
    CHROOTS = {
      "3.3" => ENV.fetch("SONDE_RUBY33_CHROOT", "/var/cache/sonde/trixie-ruby33"),
      "3.4" => ENV.fetch("SONDE_RUBY34_CHROOT", "/var/cache/sonde/sid-ruby34")
    }.freeze
    TARGET_POINTS = 0.3
    WORKLOAD = "cpu"
    RATES = [100, 1000].freeze
    SCALE = 3.0

    def initialize(repeats:, rubies:)
      @repeats = repeats
      @rubies = rubies
      @rates = RATES
      @scale = SCALE
      @shares = Hash.new { |hash, key| hash[key] = [] }
    end

    def run
      abort "perf is not installed (apt-get install linux-perf)" unless SelfProfile.available?
      Dir.mktmpdir("sonde-cpu-cost-perf", File.join(Child::ROOT, "tmp")) do |dir|
        child = Child.new(dir)
        @symfs = @rubies.reject(&:host).to_h { |ruby| [ruby.series, symfs(dir, ruby.series)] }
        profilers = PROFILERS.keys.to_h { |profiler| [profiler, profiler] }
        @missing = @rubies.to_h { |ruby| [ruby.series, missing_columns(ruby, File.join(dir, "lib"), profilers)] }
        runs = @rubies.flat_map do |ruby|
          @rates.product(PROFILERS.keys - @missing[ruby.series].keys).map { |rate, profiler| [ruby, rate, profiler] }
        end
        interleave(runs, rounds: @repeats, results: @shares, word: "repeat") do |ruby, rate, profiler|
          measure(child, dir, ruby, profiler, rate)
        end
      end
      report
    end

    private

    # A folder perf reads a chroot's files through: the chroot's top level,
    # but for the project's top folder, which is the host's (the chroot
    # bind-mounts the project at the same path).
    def symfs(dir, series)
      symfs = File.join(dir, "symfs-#{series}")
      chroot = CHROOTS.fetch(series)
      FileUtils.mkdir_p(symfs)
      project_top = Child::ROOT.split("/")[1]
      Dir.children(chroot).each do |entry|
        File.symlink(File.join(chroot, entry), File.join(symfs, entry)) unless entry == project_top
      end
      File.symlink("/#{project_top}", File.join(symfs, project_top))
      symfs
    end

    # One run: the profiler's share of the Ruby process's perf samples,
    # split into [in its code or threads, in the kernel's signal delivery].
    # --no-buildid: perf would read build ids from the host's files at the
    # chroot's paths, and then refuse the chroot's own libraries.
    def measure(child, dir, ruby, profiler, rate)
      data = File.join(dir, "cost.perf.data")
      perf = ["perf", "record", "-q", "--no-buildid", "-e", "cpu-clock", "-F", PERF_FREQUENCY_HZ.to_s, "-m",
              PERF_BUFFER_PAGES.to_s, "--call-graph", CALL_GRAPH, "-o", data, "--"]
      result = child.run(WORKLOAD, profiler: profiler, rate: rate, scale: @scale, ruby: ruby, prefix: perf)
      paths = ruby.host ? [] : ["--symfs=#{@symfs.fetch(ruby.series)}", "--kallsyms=/proc/kallsyms"]
      script, err, status = Open3.capture3("perf", "script", "-i", data, *paths, "--no-inline", "-F",
                                           "comm,pid,tid,ip,sym,dso")
      raise Child::Failure, "perf script failed: #{err.lines.last}" unless status.success?

      count(script, PROFILERS.fetch(profiler)).merge(taken: samples_taken(profiler, result.hook), cpu_s: result.cpu_s)
    ensure
      File.delete(data) if data && File.exist?(data)
    end

    # What the profiler took for that cost: Sonde's CPU samples (one per
    # interval of a thread's CPU clock) and sampling passes (one per wall
    # tick, every thread), Datadog's samples and the CPU-clock ones among
    # them, the others' samples.
    def samples_taken(profiler, hook)
      case profiler
      when "sonde"
        stats = hook.fetch("stats")
        { cpu_samples: stats.fetch("cpu_samples"), passes: stats.fetch("samples") }
      when "datadog"
        { samples: hook.fetch("samples"), cpu_samples: hook.fetch("cpu_samples") }
      else
        { samples: hook.fetch("samples") }
      end
    end

    def count(script, profiler)
      samples = []
      SelfProfile.each_sample(script) { |thread_name, frames, pid, tid| samples << [thread_name, frames, pid, tid] }
      ruby_pid = samples.map { |_name, _frames, pid, _tid| pid }.tally.max_by(&:last)&.first
      total = 0
      own = 0
      kernel = 0
      samples.each do |thread_name, frames, pid, tid|
        next unless pid == ruby_pid
        next if tid == pid && !thread_name.match?(RUBY_MAIN_THREAD)

        total += 1
        if (profiler[:thread] && thread_name.match?(profiler[:thread])) ||
           frames.any? { |_name, dso| dso.match?(profiler[:library]) }
          own += 1
        elsif frames.any? { |name, _dso| name.match?(KERNEL_SIGNAL) || name.match?(SIGNAL_TRAMPOLINE) }
          kernel += 1
        end
      end
      raise Child::Failure, "perf recorded no samples of the Ruby process" if total.zero?

      { own: own.fdiv(total), kernel: kernel.fdiv(total), samples: total }
    end

    def report
      puts "#{WORKLOAD} workload (scale #{@scale}), #{@repeats} run(s) per Ruby, profiler and rate, shuffled in each repeat, " \
           "under `perf record -e cpu-clock -F #{PERF_FREQUENCY_HZ} --call-graph #{CALL_GRAPH}`; shares of the " \
           "Ruby process's CPU samples, median over runs, each run's total in brackets; load average " \
           "#{load_average} at the end"
      @rubies.each do |ruby|
        puts
        puts "## #{ruby.name}: #{ruby.description}"
        @rates.each { |rate| report_rate(ruby, rate) }
        puts missing_notes(@missing[ruby.series], "not available")
      end
    end

    def report_rate(ruby, rate)
      puts
      puts "| #{ruby.name}, #{rate} Hz | in its code or threads | in the kernel's signal delivery | total (each run) | " \
           "perf samples per run | what it took, per CPU second |"
      puts "|---|---|---|---|---|---|"
      totals = (PROFILERS.keys - @missing[ruby.series].keys).to_h do |profiler|
        runs = @shares[[ruby.series, rate, profiler]]
        total = median(runs.map { |run| run[:own] + run[:kernel] })
        puts format("| %s | %.2f%% | %.2f%% | %.2f%% (%s) | %d | %s |", profiler, median(runs.map { |run| run[:own] }) * 100,
                    median(runs.map { |run| run[:kernel] }) * 100, total * 100,
                    runs.map { |run| format("%.2f", (run[:own] + run[:kernel]) * 100) }.join(", "),
                    median(runs.map { |run| run[:samples] }), taken_text(runs))
        [profiler, total]
      end
      return unless totals.key?("sonde") && totals.key?("stackprof-cpu")

      difference = (totals.fetch("sonde") - totals.fetch("stackprof-cpu")) * 100
      verdict = rate == 100 ? (difference <= TARGET_POINTS ? "met" : "NOT met") : "for reference"
      puts
      puts format("Sonde - StackProf on %s at %d Hz: %+.2f%% of the process's CPU (target <= +%.1f%% at 100 Hz): %s",
                  ruby.name, rate, difference, TARGET_POINTS, verdict)
    end

    def taken_text(runs)
      runs.first[:taken].keys.map do |kind|
        format("%.0f %s", median(runs.map { |run| run[:taken].fetch(kind) / run[:cpu_s] }), kind.to_s.tr("_", " "))
      end.join(", ")
    end
  end
end

if $PROGRAM_NAME == __FILE__
  rubies = SondeBench::RubyTarget.for(ENV.fetch("SONDE_BENCH_RUBIES", SondeBench::Peers.ruby_series)
                                         .sub("host", SondeBench::Peers.ruby_series))
  missing = rubies.reject(&:available?)
  abort missing.map(&:reason).join("\n") unless missing.empty?
  SondeBench::CpuCostPerf.new(repeats: Integer(ARGV.fetch(0, "3")), rubies: rubies).run
end
