# frozen_string_literal: true

require_relative "support/test_helper"

# The overhead budget (pacing.c): however expensive a sampling pass is, the
# time spent sampling stays under overhead_target percent of wall time.
class OverheadBudgetTest < Minitest::Test
  include SondeTestHelper

  # What the budget may run ahead by: the credit one second earns (pacing.c).
  def allowance(target_percent, duration)
    target_percent / 100.0 / duration
  end

  # The budget is spent in CPU time (pacing.h); the wall time of the same
  # passes is looser: a loaded machine deschedules some of them.
  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 0.69-0.81x its bound (<=); "the budget was spent, not
  # skipped" 2.86-3.36x its bound (>); a bound 0.33-1.31x its bound (<=); "it still samples"
  # 17.00-19.00x its bound (>).
  statistical def test_five_hundred_threads_three_hundred_deep_stay_under_one_percent
    facts = run_workload("many_deep_threads", "500", "300", "4", "1.0")
    stats = facts["stats"]
    charged = stats["pacing_charged_ns_total"] / 1e9 / facts["duration"]
    wall = stats["sampling_time_ns_total"] / 1e9 / facts["duration"]
    summary = "charged #{(charged * 100).round(3)}%, wall #{(wall * 100).round(3)}% " \
              "(#{stats["samples"]} passes of #{(stats["sampling_time_ns_avg"] / 1e6).round(2)} ms)"
    assert_operator charged, :<=, 0.01 + allowance(1.0, facts["duration"]), summary
    assert_operator charged, :>, 0.003, "the budget was spent, not skipped: #{summary}"
    assert_operator wall, :<=, 2 * (0.01 + allowance(1.0, facts["duration"])), summary
    assert_operator stats["pacing_delayed_ticks"], :>, 0, "the budget had to slow sampling down"
    assert_operator stats["samples"], :>, 3, "it still samples"
  end

  # Passes well under the budget are never delayed. Three threads 10 deep
  # cost about 5 µs a pass on 3.1 and 9-13 µs on 3.3 (GVL times, Thread.list),
  # which at 1000 Hz is already about 1%: so a 5% target, where they are cheap.
  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "1000 Hz asked (half, on a loaded machine)" 0.64-1.53x its
  # bound (>=); "the budget stayed out of the way" 0.00-0.00x its bound (<).
  statistical def test_cheap_passes_keep_the_asked_rate
    facts = run_workload("many_deep_threads", "2", "10", "1", "5.0")
    stats = facts["stats"]
    assert_operator stats["samples"], :>=, 0.5 * 1000 * facts["duration"], "1000 Hz asked (half, on a loaded machine)"
    assert_operator stats["pacing_delayed_ticks"], :<, 0.05 * stats["samples"], "the budget stayed out of the way"
  end

  def test_overhead_target_is_validated
    [0, -1, 20.5, "1", nil].each do |bad|
      error = assert_raises(Sonde::ArgumentError) { Sonde.start(overhead_target: bad) }
      assert_match(/overhead_target must be a number above 0 and at most 20/, error.message)
    end
  end
end
