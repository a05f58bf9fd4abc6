# frozen_string_literal: true

require "socket"
require_relative "stress_helper"

# Proves that failures inside the profiler never reach the application:
# - a sampling pass that fails (Sonde::Native::Testing.fail_next_sample, with signals
#   and on the idle helper without) stops sampling; four threads computing
#   finish with the right results; Sonde.running? turns false; Sonde.stop
#   raises Sonde::SamplingError carrying the cause and the partial profile;
#   a new Sonde.start works; in continuous mode the process exits 0 without
#   Sonde.stop (the at-exit stop warns);
# - 100 start/fail/stop cycles (short: 30) leak nothing (RSS within 5 MB);
# - an exporter whose target is down for the whole run (continuous mode,
#   every: 1; pyroscope and datadog, at a closed loopback port and at one
#   that accepts but never answers) costs the application nothing beyond
#   noise: ops per CPU second of a CPU loop within 30% of runs without Sonde
#   (interleaved rounds, the median of each round's ratio), and the exporters
#   count the failures and drops.
class FailuresTest < Minitest::Test
  include SondeStress::Assertions

  MAX_RSS_GROWTH_KB = 5 * 1024
  MIN_THROUGHPUT_RATIO = 0.7
  # Continuous mode waits Continuous::SHUTDOWN_SECONDS (5) for the exporters
  # at stop, then kills their thread and waits up to 1 s more.
  MAX_STOP_SECONDS = 8

  def workload(*args, timeout: 120)
    facts, stderr, status = SondeStress.run_workload("failures", *args, timeout: timeout)
    assert_clean_exit(status, stderr, "failures #{args.first}")
    [facts, stderr]
  end

  def check_forced_failure(facts, stderr)
    assert facts["results_correct"], "the application's results must be right"
    refute facts["running_after_failure"]
    assert_equal "raised", facts["stop"]
    assert_match(/\Asampling failed and stopped early .*forced by Sonde::Native/, facts["message"])
    assert_equal "RuntimeError", facts["cause"]
    assert_operator facts["partial_profile_bytes"], :>, 0
    assert_match(/sonde: sampling failed, so profiling stopped \(the application goes on\)/, stderr)
    assert_operator facts["restart_samples"], :>, 0, "a new run samples again"
  end

  def test_forced_sampling_failure_with_signals
    facts, stderr = workload("forced", "signals")
    check_forced_failure(facts, stderr)
  end

  def test_forced_sampling_failure_on_the_idle_helper_without_signals
    facts, stderr = workload("forced", "nosignals")
    check_forced_failure(facts, stderr)
  end

  def test_forced_sampling_failure_in_continuous_mode_then_exit
    Dir.mktmpdir do |dir|
      facts, stderr = workload("forced_continuous", dir)
      assert facts["results_correct"]
      refute facts["running_after_failure"]
      assert_match(/sonde: at exit: Sonde::SamplingError/, stderr)
      refute_empty Dir[File.join(dir, "*.pprof")], "the flusher goes on exporting"
    end
  end

  def test_failure_churn_leaks_nothing
    count = SondeStress.size(30, 100)
    facts, = workload("failure_churn", count.to_s)
    growth = facts["rss_after_kb"] - facts["rss_before_kb"]
    SondeStress.record("failure churn", cycles: count, rss_before_kb: facts["rss_before_kb"],
                                        rss_after_kb: facts["rss_after_kb"], growth_kb: growth,
                                        seconds: facts["seconds"].round(2), outcomes: facts["outcomes"])
    assert_equal({ "raised" => count }, facts["outcomes"])
    assert_operator growth, :<, MAX_RSS_GROWTH_KB
  end

  def median(values)
    sorted = values.sort
    sorted[sorted.size / 2]
  end

  def paired_ratios(runs, baselines, key)
    runs.zip(baselines).map { |run, baseline| run[key] / baseline[key] }
  end

  def test_exporter_target_down_costs_the_application_nothing
    silent = TCPServer.new("127.0.0.1", 0) # accepts (the kernel does), never answers
    silent_url = "http://127.0.0.1:#{silent.addr[1]}"
    closed_url = "http://127.0.0.1:#{SondeStress.closed_port}"
    targets = { "pyroscope closed" => "pyroscope:#{closed_url}", "datadog silent" => "datadog:#{silent_url}" }
    if SondeStress.full?
      targets["datadog closed"] = "datadog:#{closed_url}"
      targets["pyroscope silent"] = "pyroscope:#{silent_url}"
    end
    pairs = SondeStress.size(4, 5)
    seconds = SondeStress.size(1.5, 4.0)
    runs = Hash.new { |h, k| h[k] = [] }
    pairs.times do
      runs["without Sonde"] << workload("throughput", seconds.to_s).first
      targets.each { |name, export| runs[name] << workload("throughput", seconds.to_s, export).first }
    end
    baseline = median(runs["without Sonde"].map { |f| f["ops_per_cpu_second"] })
    baseline_wall = median(runs["without Sonde"].map { |f| f["ops_per_second"] })
    figures = { pairs: pairs, seconds: seconds, baseline_ops_per_cpu_s: baseline.round,
                baseline_ops_per_s: baseline_wall.round }
    targets.each_key do |name|
      facts = runs[name]
      # Each run against the run without Sonde of its own round: this VM's
      # speed drifts between rounds, and a median of ratios follows the
      # drift where a ratio of medians does not.
      ratio = median(paired_ratios(facts, runs["without Sonde"], "ops_per_cpu_second"))
      wall_ratio = median(paired_ratios(facts, runs["without Sonde"], "ops_per_second"))
      after = facts.map { |f| f["exporters_after_stop"].first.last }
      figures[name] = { ratio_cpu: ratio.round(3), ratio_wall: wall_ratio.round(3),
                        stop_seconds_max: facts.map { |f| f["stop_seconds"] }.max.round(2),
                        flushes: facts.map { |f| f["flushes"] },
                        failed: after.map { |s| s["failed"] }, dropped: after.map { |s| s["dropped"] },
                        retries: after.map { |s| s["retries"] } }
      assert_operator ratio, :>=, MIN_THROUGHPUT_RATIO,
                      "#{name}: ops per CPU second #{ratio.round(2)} of the run without Sonde"
      facts.each do |f|
        assert_operator f["flushes"], :>=, 1, "#{name}: the flusher ran"
        assert_equal 0, f["flush_errors"], "#{name}: a dead target is the exporter's business, not the flusher's"
        assert_operator f["stop_seconds"], :<, MAX_STOP_SECONDS, "#{name}: Sonde.stop waited too long"
        stats = f["exporters_after_stop"].first.last
        assert_equal 0, stats["exported"], name
        assert_operator stats["failed"] + stats["dropped"], :>=, 1, "#{name}: the loss is counted (#{stats})"
        assert_match(/ECONNREFUSED|in flight at shutdown|Timeout/, stats["last_error"].to_s, name)
      end
    end
    SondeStress.record("exporter target down", figures)
  ensure
    silent&.close
  end
end
