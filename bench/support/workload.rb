# frozen_string_literal: true

# Timing for the benchmark workloads: runs a workload's body, then prints one
# line with the body's elapsed time and the process CPU time it used (every
# thread, the profiler's own included), so overhead is measured inside the
# process, without Ruby's start-up or the profiler's stop.
#
# A workload does a fixed amount of work (scaled by SONDE_BENCH_SCALE), so a
# slower run is a slower run; or, when SONDE_BENCH_SECONDS is set, repeats its
# rounds until that many seconds have passed (the 60 s flush and memory runs).
require "json"

module SondeBench
  # What a workload prints before its JSON result, for the runner to find.
  RESULT_PREFIX = "sonde-bench-workload: "

  module Workload
    class << self
      # Work multiplier: 1.0 is the full benchmark's size.
      def scale
        @scale ||= Float(ENV.fetch("SONDE_BENCH_SCALE", "1"))
      end

      # Seconds to run for, or nil for a fixed amount of work.
      def seconds
        value = ENV["SONDE_BENCH_SECONDS"]
        value && !value.empty? ? Float(value) : nil
      end

      # How many rounds a fixed-work run does, for a full-size count of base.
      def rounds(base)
        [(base * scale).round, 1].max
      end

      # Yields round numbers: base rounds (scaled), or until the deadline in
      # duration mode. Safe to call from several threads.
      def each_round(base)
        limit = seconds ? nil : rounds(base)
        round = 0
        while limit ? round < limit : now < deadline
          yield round
          round += 1
        end
        round
      end

      # Runs the workload's body and prints its result line.
      def measure(name)
        @deadline = now + (seconds || 0)
        wall_started = now
        cpu_started = process_cpu
        gc_started = GC.count
        details = yield
        result = { workload: name, elapsed_s: now - wall_started, cpu_s: process_cpu - cpu_started,
                   gc_runs: GC.count - gc_started }
        result[:details] = details if details.is_a?(Hash)
        $stdout.puts "#{RESULT_PREFIX}#{JSON.generate(result)}"
        $stdout.flush
      end

      def deadline
        @deadline || Float::INFINITY
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end

      # The process's CPU time, brought up to date first. While a process-wide
      # CPU timer is armed (StackProf's ITIMER_PROF), Linux answers
      # CLOCK_PROCESS_CPUTIME_ID from the thread group's timer accounting,
      # which a running thread brings up to date only at the kernel's tick
      # or when it enters the kernel: a CPU-bound loop's process clock then
      # reads up to one tick (4 ms) behind its own thread clock. Seen here:
      # 0.3-s slices of the cpu workload under StackProf read 2 ms (0.7%)
      # less process CPU than main-thread CPU, a bias in StackProf's favour
      # in every comparison. Reading the calling thread's clock first makes
      # the kernel account the running thread's time to the group, so the
      # process clock read right after is current.
      def process_cpu
        Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
        Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
      end
    end
  end
end
