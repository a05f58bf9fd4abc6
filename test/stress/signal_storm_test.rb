# frozen_string_literal: true

require_relative "stress_helper"

# Proves that the SIGPROF handler, which reads the interrupted thread's own
# stack, holds wherever the signal lands, at 1000 Hz: during GC (marking,
# sweeping, compacting), in a thread without the GVL while another runs the
# GC, in threads that are being born or killed, and in a C call that holds
# the GVL for 1.5 s. The process exits normally, the profile is whole
# (go tool pprof reads it), and what could not be taken is counted: the
# capture buffer's drops while nothing could record, stacks that failed a
# sanity check. No warning reaches stderr.
class SignalStormTest < Minitest::Test
  include SondeStress::Assertions
  include SondeTestHelper

  def test_signals_in_gc_in_thread_churn_and_in_a_long_c_call
    seconds = SondeStress.size(3, 20)
    Dir.mktmpdir do |dir|
      out = File.join(dir, "storm.pprof")
      burner = SondeStress.build_c_extension(File.join(SondeStress::ROOT, "test", "support", "cpu_burner.c"))
      facts, stderr, status = SondeStress.run_workload("signal_storm", burner, seconds.to_s, out,
                                                       timeout: 120 + seconds * 3)
      assert_clean_exit(status, stderr, "signal storm")
      assert_empty stderr
      stats = facts.fetch("stats")
      SondeStress.record("signal storm", seconds: seconds, threads_born: facts["threads_born"],
                                         cpu_signals: stats["cpu_signals"], captures_dropped: stats["captures_dropped"],
                                         inconsistent_stacks: stats["inconsistent_stacks"],
                                         gc_samples: stats["gc_samples"], cpu_samples: stats["cpu_samples"],
                                         stale_timer_signals: stats["stale_timer_signals"],
                                         unattributed: stats["unattributed_cpu_samples"])
      assert_operator facts["threads_born"], :>=, 100
      assert_operator stats["cpu_signals"], :>, 100
      # The long C call holds the GVL for 1.5 s of CPU with its timer
      # firing at the kernel's tick: more captures than the buffer holds.
      assert_operator stats["captures_dropped"], :>, 0, "drops while nothing could record must be counted"
      assert facts["long_call"], "the long C call's CPU samples that fit were recorded"
      assert facts["without_gvl"], "the thread without the GVL was sampled"
      assert facts["gc_frames"], "signals that landed in GC are GC samples"
      assert_equal 0, stats["cpu_timer_threads"], "no timer outlives the run"
      assert_go_pprof_reads(out)
    end
  end
end
