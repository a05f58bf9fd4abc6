# frozen_string_literal: true

# Exec from a profiled process: spins in `burn_before_exec` while Sonde
# samples at 1000 Hz (so that a SIGPROF is likely in flight at any moment),
# then execs a shell that exits 7. A SIGPROF reaching the shell would kill
# it ("Profiling timer expired") and the status would not be 7.
#
#   ruby production_exec.rb continuous DIR   # Sonde.start(continuous: true, every: 1, export: "dir:DIR")
#   sonde record --rate 1000 -o FILE -- ruby production_exec.rb record
require "sonde" # already loaded under `sonde record`

mode, dir = ARGV
Sonde.start(continuous: true, every: 1, export: "dir:#{dir}", service: "execer", rate: 1000) if mode == "continuous"

def burn_before_exec(seconds)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
end

burn_before_exec(0.3)
exec("sh", "-c", "sleep 1; exit 7")
