# frozen_string_literal: true

require_relative "support/test_helper"

# Two recorder slots: Sonde.flush hands over the period since the previous
# flush while sampling goes on; nothing is lost or counted twice.
class FlushTest < Minitest::Test
  include SondeTestHelper

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "most periods have samples" 1.43-1.50x its bound (>=).
  statistical def test_twenty_flushes_add_up_to_the_stats
    stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
      worker = Thread.new do
        x = 0
        loop { x += 1 }
      end
      Sonde.start(rate: 500)
      profiles = Array.new(20) do
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.05
        x = 0
        x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        Sonde.flush
      end
      profiles << Sonde.stop
      worker.kill
      sums = profiles.map do |profile|
        decoded = profile.decode
        %w[cpu-samples wall-samples].to_h { |t| [t, decoded.samples.sum { |s| s.values[decoded.value_index(t)] }] }
      end
      bounds = profiles.map { |p| d = p.decode; [d.time_nanos, d.time_nanos + d.duration_nanos] }
      puts JSON.generate(sums: sums, stats: Sonde.stats, starts: bounds.map(&:first), ends: bounds.map(&:last))
    RUBY
    assert_succeeded status, stderr
    facts = JSON.parse(stdout)
    sums = facts["sums"]
    assert_equal 21, sums.size
    assert_equal facts["stats"]["cpu_samples"], sums.sum { |s| s["cpu-samples"] }, "cpu-samples over all flushes"
    assert_equal facts["stats"]["thread_samples"], sums.sum { |s| s["wall-samples"] }, "wall-samples over all flushes"
    assert_equal 20, facts["stats"]["flushes"]
    assert_operator sums.count { |s| s["cpu-samples"].positive? }, :>=, 14, "most periods have samples"
    # Periods follow each other with no gap and no overlap, to the nanosecond.
    assert_equal facts["ends"][0...-1], facts["starts"][1..]
  end

  def test_flush_when_not_running
    assert_raises(Sonde::StateError) { Sonde.flush }
  end
end
