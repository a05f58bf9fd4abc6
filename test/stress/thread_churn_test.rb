# frozen_string_literal: true

require_relative "stress_helper"

# Proves that thread churn under sampling at 1000 Hz is safe and keeps no
# state of dead threads: 10,000 short-lived threads (short: 2,000), 20 at a
# time, that sleep, compute, allocate, die of an exception or are killed,
# are created and joined while a long-lived thread burns CPU. The process
# exits normally; Sonde's count of threads with live state
# (Sonde.stats[:threads_tracked], the size of thread_contexts.c's table)
# never exceeds the threads alive since the last pass and is back to 1
# (main) after the churn; and the long-lived thread's samples keep coming throughout (about
# one per pass, rate x duration). The same churn without signals too.
class ThreadChurnTest < Minitest::Test
  include SondeStress::Assertions

  BATCH = 20 # threads alive at once besides main and busy (workload's BATCH)
  # The busy thread gets a sample at every pass (it may miss the pass that
  # ran just before it was scheduled, and gets some after the churn).
  MIN_SHARE_OF_PASSES = 0.9
  # Passes come at the rate unless the machine is starved: at least half of
  # rate x duration, generous on this shared 2-core machine (97% measured
  # when it is quiet, 78% under a load average of 10).
  MIN_PASS_SHARE = 0.5

  def churn(count, mode)
    facts, stderr, status = SondeStress.run_workload("thread_churn", count.to_s, mode)
    assert_clean_exit(status, stderr, "thread churn (#{mode})")
    assert_empty stderr
    facts
  end

  def check_state_is_freed(facts, count)
    assert_equal count, facts["threads_created"]
    # Dead threads are freed at the next pass: after a batch, only the
    # threads of the batches since the last pass (one, when passes come at
    # the rate; CI once saw 65 tracked after a stall), main and busy.
    assert_operator facts["max_excess_tracked"], :<=, 0,
                    "per-thread state must not pile up: #{facts["max_threads_tracked"]} contexts at once, at most " \
                    "#{facts["most_batches_without_pass"]} batches of #{BATCH} without a pass"
    assert_equal facts["live_threads_after"], facts["threads_tracked_after"],
                 "dead threads' state must be freed: only the live threads (main) stay tracked"
    assert_equal 0, facts["dropped_samples"]
  end

  def test_thread_churn_with_signals
    count = SondeStress.size(2_000, 10_000)
    facts = churn(count, "signals")
    expected = facts["rate"] * facts["churn_seconds"]
    SondeStress.record("thread churn signals", threads: count, churn_seconds: facts["churn_seconds"].round(2),
                                               max_threads_tracked: facts["max_threads_tracked"],
                                               most_batches_without_pass: facts["most_batches_without_pass"],
                                               threads_tracked_after: facts["threads_tracked_after"],
                                               busy_wall_samples: facts["busy_wall_samples"],
                                               busy_cpu_samples: facts["busy_cpu_samples"],
                                               expected_samples: expected.round,
                                               passes_during_churn: facts["passes_during_churn"])
    check_state_is_freed(facts, count)
    assert_operator facts["busy_wall_samples"], :>=, MIN_SHARE_OF_PASSES * facts["passes_during_churn"],
                    "the busy thread's samples must keep coming during the churn (#{facts.inspect})"
    assert_operator facts["passes_during_churn"], :>=, MIN_PASS_SHARE * expected,
                    "passes must come at about the rate during the churn (#{facts.inspect})"
    assert_operator facts["busy_cpu_samples"], :>, 0
  end

  def test_thread_churn_without_signals
    count = SondeStress.size(1_000, 5_000)
    facts = churn(count, "nosignals")
    SondeStress.record("thread churn no-signals", threads: count, churn_seconds: facts["churn_seconds"].round(2),
                                                  max_threads_tracked: facts["max_threads_tracked"],
                                                  threads_tracked_after: facts["threads_tracked_after"],
                                                  busy_wall_samples: facts["busy_wall_samples"], passes: facts["passes"])
    check_state_is_freed(facts, count)
    assert_equal 0, facts["signals_sent"]
    assert_operator facts["busy_wall_samples"], :>, 0
  end
end
