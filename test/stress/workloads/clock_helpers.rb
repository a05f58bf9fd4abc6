# frozen_string_literal: true

# What the stress workloads share: the monotonic clock, a CPU spin of a
# given length, and the process's resident memory. Loaded with
# require_relative; defines top-level methods, as the workloads did.

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Burns CPU on this thread for `seconds` of wall time.
def spin(seconds)
  deadline = monotonic + seconds
  x = 0
  x += 1 while monotonic < deadline
  x
end

# Resident set size in KB, from /proc/self/status.
def rss_kb
  File.foreach("/proc/self/status") { |line| return line.split[1].to_i if line.start_with?("VmRSS:") }
end
