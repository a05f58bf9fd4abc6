# frozen_string_literal: true

# Spins until the calling thread has used `seconds` of CPU on its own clock,
# and returns the CPU it used, in nanoseconds: the app's own truth that the
# profiles are checked against.
module Burner
  module_function

  def burn(seconds)
    started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
    limit = started + (seconds * 1e9).to_i
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) < limit
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - started
  end
end
