# frozen_string_literal: true

# A prefork server in miniature (Puma, Unicorn): the parent works in
# `parent_before_fork`, then forks WORKERS workers; worker i spins in
# `worker_<i>` and exits normally (so its exit hooks write its profile).
#
#   ruby production_prefork.rb continuous DIR   # Sonde.start(continuous: true, export: "dir:DIR")
#   sonde record -o FILE -- ruby production_prefork.rb record
#
# Prints one JSON line per worker (its index, pid, whether Sonde and the
# continuous flusher run in it) and last one line for the parent: its pid
# and each worker's pid and exit status.
require "json"
require "sonde" # already loaded under `sonde record`

$stdout.sync = true # nothing buffered before fork may be written twice
mode, dir = ARGV
WORKERS = 4
WORKER_SECONDS = 1.0
PARENT_SECONDS = 0.5

if mode == "continuous"
  # every: 60 means one profile per process, written at its exit: the
  # directory exporter keeps only the newest 10 files of a service across
  # processes, and 5 processes flushing every second would go past that.
  Sonde.start(continuous: true, every: 60, export: "dir:#{dir}", service: "prefork")
end

def burn(seconds)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
end

def parent_before_fork
  burn(PARENT_SECONDS)
end

# Real methods (not define_method blocks), so each worker's stack names it:
# Object#worker_0 ... Object#worker_3.
WORKERS.times do |i|
  Object.class_eval(<<~RUBY, __FILE__, __LINE__ + 1)
    def worker_#{i}(seconds)
      cpu_started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      burn(seconds)
      Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu_started
    end
  RUBY
end

parent_before_fork
pids = Array.new(WORKERS) do |i|
  fork do
    cpu = __send__(:"worker_#{i}", WORKER_SECONDS)
    puts JSON.generate(worker: i, pid: Process.pid, cpu: cpu, running: Sonde.running?,
                       flusher: Sonde.threads.any? { |t| t.name == "sonde-flusher" && t.alive? })
  end
end
statuses = pids.to_h { |pid| [pid, Process.wait2(pid).last.exitstatus] }
puts JSON.generate(parent: Process.pid, workers: statuses)
