# frozen_string_literal: true

# C functions a profile must name: Kernel#sleep (a thread asleep while no
# thread holds the GVL, so passes run on the idle helper, or on 3.3+ the
# wait is credited when it wakes, whatever a JIT does), then Kernel#loop
# and Integer#times (the main thread's CPU, one sample per CPU signal).
# Phases in turn, not side by side: with YJIT on 3.1 a thread that holds
# the GVL runs passes only at rare safe points, and a sleep beside it could
# pass unsampled. Writes the profile to ARGV[0]; prints one JSON line.
require "json"
require "sonde"

SECONDS = Float(ARGV.fetch(1, "0.3"))

def burn(seconds)
  started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  x = 0
  loop do
    10_000.times { |i| x += i * i }
    break if Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started >= seconds
  end
  x
end

Sonde.profile(out: ARGV.fetch(0), rate: 100) do
  Thread.new { sleep(SECONDS) }.join
  burn(SECONDS)
end
puts JSON.generate(stats: Sonde.stats)
