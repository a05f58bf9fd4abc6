# frozen_string_literal: true

# Unthrottled thread churn (issue 23, finding 6), for
# test/stress/churn_rate_test.rb.
#
#   ruby churn_rate.rb SONDE SECONDS [RATE]
#     SONDE    "sonde" to profile (Sonde.start(rate: RATE), the defaults
#              otherwise), "control" for the same program without Sonde
#     SECONDS  how long the churn runs
#     RATE     Sonde's rate in Hz (100)
#
# CHURNERS threads each create a thread, let it do a little work and join
# it, as fast as they can, until SECONDS have passed: thousands of threads a
# second, CHURNERS alive at a time besides the churners. Prints one JSON
# line: the threads made and their rate, the process's CPU over the churn
# (CLOCK_PROCESS_CPUTIME_ID), the CPU in the profile, the peak RSS
# (VmHWM: the high-water mark since the churn started, reset then through
# /proc/self/clear_refs, read once Sonde has stopped and before the profile
# is read back) and RSS at the end, and Sonde's stats.
require "json"

profiled, seconds, rate = ARGV
abort "usage: churn_rate.rb sonde|control SECONDS [RATE]" unless %w[sonde control].include?(profiled) && seconds
seconds = Float(seconds)
rate = Integer(rate || 100)
CHURNERS = 4

def status_kb(field)
  File.foreach("/proc/self/status") { |line| return line.split[1].to_i if line.start_with?("#{field}:") }
  nil
end

# "5" resets the peak RSS to the current RSS (Linux >= 4.0): the peak then
# says what the churn took, not what loading took.
def reset_peak_rss
  File.write("/proc/self/clear_refs", "5")
  true
rescue SystemCallError
  false
end

# A short life with a little of everything a thread does: compute, allocate.
def short_work
  Array.new(8) { |k| k * k }.sum
end

if profiled == "sonde"
  require "sonde"
  Sonde.start(rate: rate)
end
GC.start
peak_reset = reset_peak_rss
rss_before = status_kb("VmRSS")
cpu_before = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
deadline = started + seconds
churners = Array.new(CHURNERS) do
  Thread.new do
    made = 0
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      Thread.new { short_work }.join
      made += 1
    end
    made
  end
end
made = churners.sum(&:value)
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started

facts = { ruby: RUBY_VERSION, profiled: profiled, rate: rate, seconds: elapsed, threads: made,
          threads_per_s: made / elapsed }
if profiled == "sonde"
  profile = Sonde.stop
  facts[:process_cpu_s] = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu_before
  # Sonde's peak, stop and export included; not this script's own reading
  # of the profile, whose Ruby objects (with the timeline, one sample per
  # moment: 28,000 for 2 s of churn) would add about 27 MB.
  facts[:peak_rss_kb] = status_kb("VmHWM")
  decoded = profile.decode
  cpu = decoded.value_index("cpu-time")
  facts[:profile_cpu_s] = decoded.samples.sum { |sample| sample.values[cpu] } / 1e9
  facts[:stats] = profile.stats.select do |key, _|
    %i[samples idle_samples cpu_samples thread_samples dropped_samples threads_tracked cpu_timer_failures
       cpu_timer_signals unattributed_cpu_samples inconsistent_stacks captures_dropped pacing_delayed_ticks
       sampling_time_ns_avg sampling_time_ns_max threads_ended cpu_remainder_samples cpu_remainder_ns ended_threads_merged teardown_cpu_threads teardown_cpu_ns native_exit_cpu_ns timeline_samples].include?(key)
  end
else
  facts[:process_cpu_s] = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu_before
  facts[:peak_rss_kb] = status_kb("VmHWM")
end
facts[:peak_rss_reset] = peak_reset
facts[:rss_before_kb] = rss_before
facts[:rss_after_kb] = status_kb("VmRSS")
puts JSON.generate(facts)
