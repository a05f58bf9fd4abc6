# frozen_string_literal: true

# An idle process, for bench/idle_cost.rb: the main thread and THREADS more
# sleep. Run under the profiler hook (support/profiler_hook.rb), which
# started the profiler before this file loaded. After WARMUP seconds (the
# sleepers parked, the profiler past its start-up) it reads the process CPU
# clock (user + sys of every thread, the profiler's own included) over
# SECONDS of wall time, and prints that as its last line, in JSON, with
# Sonde's sampling passes in the window when Sonde is the one running.
#
#   ruby -I lib -r bench/support/profiler_hook.rb bench/workloads/idle.rb THREADS WARMUP SECONDS
require "json"

threads = Integer(ARGV.fetch(0))
warmup = Float(ARGV.fetch(1))
seconds = Float(ARGV.fetch(2))

ready = Queue.new
Array.new(threads) do
  Thread.new do
    ready << true
    sleep
  end
end
threads.times { ready.pop }
sleep warmup

sonde = defined?(Sonde) && Sonde.running?
passes = Sonde.stats[:samples] if sonde
wall = Process.clock_gettime(Process::CLOCK_MONOTONIC)
cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
sleep seconds
cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu
wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall
passes = Sonde.stats[:samples] - passes if sonde
puts JSON.generate("cpu_s" => cpu, "wall_s" => wall, "passes" => passes)
