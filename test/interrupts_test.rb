# frozen_string_literal: true

require_relative "support/test_helper"

# Sonde must never swallow an interrupt aimed at the application's threads.
# A sampling pass runs in a postponed job on whichever thread holds the
# GVL; any Ruby method it called would run that thread's pending
# interrupts, and Ruby drops what a postponed job throws, so a Thread#kill
# or Thread#raise would be lost (a killed thread that runs on). The pass
# and Sonde's thread-begin hook call no Ruby method; this checks the result.
class InterruptsTest < Minitest::Test
  include SondeTestHelper

  # At 5000 Hz a pass is more often due just as a raise lands, so 200
  # threads find a pass that runs Ruby code (rb_eval_string put in the
  # postponed job, 5 Dec 2026, 3.1) in 6 of 6 runs, with 3-7 raises lost
  # each; at 1000 Hz they lost 0-3 (2 runs of 3 caught it). The 1000
  # threads at 1000 Hz this test had took 50 s of each Ruby's CI leg,
  # most of it Ruby's 100 ms timeslices of the spinning threads.
  # Unchanged Sonde: 0 lost in 4 runs, 10.2-10.4 s each.
  def test_every_kill_and_raise_is_delivered_while_sampling
    facts = run_workload("kills_and_raises", "200", "5000")
    assert_equal 0, facts["survivors"], "threads that outlived their Thread#kill or Thread#raise"
    assert_equal facts["count"] / 2, facts["rescued"], "Thread#raise delivered to every raised-into thread"
    assert_operator facts["samples"], :>, 0
  end
end
