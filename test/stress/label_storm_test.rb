# frozen_string_literal: true

require_relative "stress_helper"

# Labels and trace contexts hold under a signal storm (1000 Hz): fibers
# switching all the time on several threads, each under its own labels and
# a new span every turn, nested and left by exceptions, threads born and
# killed inside labelled blocks, GC running.
# The process exits normally, the profile is whole, and each fiber's CPU
# comes out under its own label as it measured it.
class LabelStormTest < Minitest::Test
  include SondeStress::Assertions
  include SondeTestHelper

  def test_fibers_switching_under_labels_at_1000_hz
    seconds = SondeStress.size(3, 20)
    Dir.mktmpdir do |dir|
      out = File.join(dir, "labels.pprof")
      facts, stderr, status = SondeStress.run_workload("label_storm", seconds.to_s, out, timeout: 120 + seconds * 3)
      assert_clean_exit(status, stderr, "label storm")
      assert_empty stderr
      measured = facts.fetch("measured")
      profiled = facts.fetch("profiled")
      total = measured.values.sum
      misattributed = measured.sum { |name, seconds_spent| (profiled.fetch(name, 0) - seconds_spent).abs }
      SondeStress.record("label storm", seconds: seconds, fibers: measured.size, threads_born: facts["threads_born"],
                                        cpu_seconds: total.round(2), misattributed_share: (misattributed / total).round(3),
                                        cpu_signals: facts.dig("stats", "cpu_signals"))
      assert_equal 24, measured.size
      assert_operator facts["threads_born"], :>=, 3 # born and ended inside labelled blocks, against the GVL's burners
      assert_operator misattributed / total, :<, 0.2, "fibers' CPU under the wrong label: #{profiled} vs #{measured}"
      assert_operator facts["traced_samples"], :>, 100
      assert_equal 0, facts["torn_traces"], "a sample's trace ids disagree: a torn read"
      assert_equal 0, facts["foreign_traces"], "a sample carries another fiber's span"
      assert_go_pprof_reads(out)
    end
  end
end
