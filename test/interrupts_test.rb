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

  def test_every_kill_and_raise_is_delivered_while_sampling
    facts = run_workload("kills_and_raises", "1000")
    assert_equal 0, facts["survivors"], "threads that outlived their Thread#kill or Thread#raise"
    assert_equal facts["count"] / 2, facts["rescued"], "Thread#raise delivered to every raised-into thread"
    assert_operator facts["samples"], :>, 0
  end
end
