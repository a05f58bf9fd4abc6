# frozen_string_literal: true

require_relative "stress_helper"

# Unthrottled thread churn (issue 23, finding 6): four threads each create
# a thread, let it do a little work and join it, as fast as they can, for a
# few seconds, under Sonde at 100 Hz and without it (the control, run in
# turn with it). Proves that the profile's CPU stays close to the process's
# (before the fixes: 0.29x to 7x on 3.1, where ended threads' CPU timers
# went on firing on the native threads Ruby reuses; about 55% on 3.4,
# 0.81-0.93 until the native threads' exits were counted),
# that thread creation keeps its speed, and that Sonde's peak memory stays
# within 30 MB of the control's (before: 91 MB against 17 MB, as the
# contexts of ended threads piled up between starved passes).
#
# On the host's Ruby (3.1) and on 3.3 and 3.4 through script/ruby (skipped,
# saying so, without root). Each Ruby's CPU ratio is checked with the bound
# it meets; see CPU_BOUNDS.
class ChurnRateTest < Minitest::Test
  include SondeStress::Assertions

  WORKLOAD = File.join(SondeStress::WORKLOADS, "churn_rate.rb")
  SCRIPT_RUBY = SondeStress::SCRIPT_RUBY

  # The profile's CPU over the process's, lowest accepted: the issue's 10%.
  # 3.1: measured 0.98-1.00 in 12 runs (the rest is Sonde's own threads and
  # the main thread's join). 3.3 and 3.4: 0.988-0.995 in 5 runs since the
  # native threads' exits after their EXITED events are counted from the
  # process's clock ("(native thread exit)", exit_cpu.h; before that
  # 0.81-0.93, and 0.55 before the teardown was counted).
  CPU_BOUNDS = { "3.1" => 0.9, "3.3" => 0.9, "3.4" => 0.9 }.freeze
  # Above 1, the profile counted CPU twice (ended threads' timers).
  CPU_MAX = 1.05
  # Peak RSS over the control's, without a timeline (below). Measured +0.6
  # to +2.0 MB on 3.1, 3.3 and 3.4 (+16 to +26 MB on 3.3 and 3.4 when ended
  # threads stayed alive until the next pass and each had a thread-table
  # entry of its own), so 12 MB: well under the issue's 30, and failing the
  # regression.
  MAX_EXTRA_PEAK_KB = 12 * 1024
  # The runs keep no timeline: it logs one entry per ended thread (their
  # last CPU), up to its bound of 250,000 (timeline.md), so with it the peak
  # grows with how many threads the machine managed to make in the run
  # rather than with what Sonde keeps of the threads it tracks, which is what
  # this bound guards.
  SONDE_ENV = { "SONDE_TIMELINE" => "false" }.freeze
  # Threads made per second with Sonde over without, lowest accepted. On
  # this shared 2-core machine one pair of runs differs by 2x either way
  # (the churn is GVL hand-offs: it runs at the scheduler's pace), so the
  # median of the pairs is checked, against 0.35 (below the lowest median
  # measured, 0.41 on 3.4): what it catches is a
  # per-thread cost of the order of the thread's own (the 0.27 of before
  # the fixes on 3.1). The brief's 10% cannot be told from this noise here:
  # the measured medians are recorded (medians of three pairs, last runs:
  # 3.1 0.82, 0.83; 3.3 0.97, 0.76; 3.4 0.91, 0.75; single pairs 0.29-2.26).
  MIN_RATE_RATIO = 0.35
  # Passes over the ticks asked (100 Hz), lowest accepted: before the fixes,
  # 10 in 5 s (0.02). A tick whose signal lands on a thread that ends before
  # it checks its interrupts waits for the next tick's, so the share falls as
  # the churn speeds up: 0.36-0.85 on 3.1 at 50,000-75,000 threads a second
  # with Sonde, 0.65-0.76 on 3.3 and 3.4.
  MIN_PASS_SHARE = 0.25

  def seconds
    SondeStress.size("2", "5")
  end

  def pairs
    SondeStress.size(3, 5)
  end

  def run_churn(ruby, mode)
    command = ruby ? [SCRIPT_RUBY, ruby, "ruby", "-I#{SondeStress::LIB}", WORKLOAD] : [RbConfig.ruby, "-I#{SondeStress::LIB}", WORKLOAD]
    stdout, stderr, status = SondeStress.run_command(SONDE_ENV, *command, mode, seconds, timeout: 120)
    assert_clean_exit(status, stderr, "churn_rate #{mode} on #{ruby || RUBY_VERSION}")
    JSON.parse(stdout.lines.last)
  end

  def median(values)
    sorted = values.sort
    sorted[sorted.size / 2]
  end

  def check_churn(ruby)
    results = Array.new(pairs) { [run_churn(ruby, "control"), run_churn(ruby, "sonde")] }
    version = results.first.last["ruby"]
    bound = CPU_BOUNDS.fetch(version[/\A\d+\.\d+/])
    cpu_ratios = results.map { |_, sonde| sonde["profile_cpu_s"] / sonde["process_cpu_s"] }
    rate_ratios = results.map { |control, sonde| sonde["threads_per_s"] / control["threads_per_s"] }
    extra_peaks = results.map { |control, sonde| sonde["peak_rss_kb"] - control["peak_rss_kb"] }
    SondeStress.record("churn rate #{version}",
                       cpu_ratios: cpu_ratios.map { |r| r.round(3) }, rate_ratios: rate_ratios.map { |r| r.round(2) },
                       threads_per_s: results.map { |c, s| [c["threads_per_s"].round, s["threads_per_s"].round] },
                       extra_peak_kb: extra_peaks, passes: results.map { |_, s| s["stats"]["samples"] })
    details = results.map { |_, sonde| sonde["stats"] }.inspect
    cpu_ratios.each do |ratio|
      assert_operator ratio, :>=, bound, "Ruby #{version}: the profile's CPU over the process's #{cpu_ratios}: #{details}"
      assert_operator ratio, :<=, CPU_MAX, "Ruby #{version}: the profile counted CPU twice #{cpu_ratios}: #{details}"
    end
    extra_peaks.each do |extra|
      assert_operator extra, :<=, MAX_EXTRA_PEAK_KB, "Ruby #{version}: peak RSS over the control's #{extra_peaks} KB"
    end
    assert_operator median(rate_ratios), :>=, MIN_RATE_RATIO, "Ruby #{version}: threads/s with Sonde over without #{rate_ratios}"
    results.each do |_, sonde|
      assert_operator sonde["stats"]["samples"], :>=, MIN_PASS_SHARE * 100 * sonde["seconds"],
                      "Ruby #{version}: passes #{details}"
      assert_equal 0, sonde["stats"]["cpu_timer_failures"], "Ruby #{version}: #{details}"
      assert_equal 0, sonde["stats"]["timeline_samples"], "Ruby #{version}: SONDE_TIMELINE=false not applied"
    end
  end

  def test_churn_on_this_ruby
    check_churn(nil)
  end

  %w[3.3 3.4].each do |version|
    define_method("test_churn_on_ruby_#{version.delete(".")}") do
      build_on_other_ruby(version)
      check_churn(version)
    end
  end
end
