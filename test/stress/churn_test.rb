# frozen_string_literal: true

require_relative "stress_helper"

# Proves that starting and stopping Sonde over and over, and flushing over
# and over while threads run, leaks no memory a user could notice: after a
# warm-up, 1,000 start/stop cycles at 1000 Hz (short: 200) and 100 flushes
# under load (short: 30) grow the process's RSS by less than 5 MB, and every
# cycle and flush returns a profile. (Valgrind's view of the same churn is in
# valgrind_test.rb.) And that a process ending while Sonde samples at 1000 Hz
# with threads burning CPU (exit, exit!, abort, an uncaught exception,
# SIGTERM, every thread killed from the app), plainly or in continuous mode,
# ends the way it would without Sonde: the expected status, never a crash,
# a hang or death by SIGPROF.
class ChurnTest < Minitest::Test
  include SondeStress::Assertions

  MAX_RSS_GROWTH_KB = 5 * 1024

  def churn(mode, count, warmup)
    facts, stderr, status = SondeStress.run_workload("churn", mode, count.to_s, warmup.to_s)
    assert_clean_exit(status, stderr, "churn #{mode}")
    assert_empty stderr, "churn #{mode} printed warnings"
    facts
  end

  def test_start_stop_cycles_do_not_grow_rss
    count = SondeStress.size(200, 1000)
    facts = churn("cycles", count, 50)
    growth = facts["rss_after_kb"] - facts["rss_before_kb"]
    SondeStress.record("churn cycles", cycles: count, warmup: 50, seconds: facts["seconds"].round(2),
                                       rss_before_kb: facts["rss_before_kb"], rss_after_kb: facts["rss_after_kb"],
                                       growth_kb: growth, samples: facts["samples"])
    assert_operator growth, :<, MAX_RSS_GROWTH_KB, "RSS grew by #{growth} KB over #{count} cycles"
    assert_operator facts["pprof_bytes"], :>, 0
    assert_equal 2, facts["threads_after"], "Sonde's threads must all be gone after stop (main + sleeper)"
  end

  def test_flushes_under_load_do_not_grow_rss
    count = SondeStress.size(30, 100)
    facts = churn("flushes", count, 10)
    growth = facts["rss_after_kb"] - facts["rss_before_kb"]
    SondeStress.record("churn flushes", flushes: count, warmup: 10, seconds: facts["seconds"].round(2),
                                        rss_before_kb: facts["rss_before_kb"], rss_after_kb: facts["rss_after_kb"],
                                        growth_kb: growth, samples: facts["samples"])
    assert_operator growth, :<, MAX_RSS_GROWTH_KB, "RSS grew by #{growth} KB over #{count} flushes"
    assert_equal count + 10, facts["flushes"]
    assert_operator facts["samples"], :>, count, "sampling must go on between flushes"
  end

  EXITS = { "exit" => 0, "exit!" => 0, "abort" => 1, "raise" => 1, "term" => :TERM, "kill_threads" => 0 }.freeze

  def test_process_exit_while_sampling
    runs = 0
    Dir.mktmpdir do |dir|
      SondeStress.size(1, 3).times do
        EXITS.each do |how, expected|
          [[], ["continuous"]].each do |mode|
            _out, stderr, status = SondeStress.run_ruby(File.join(SondeStress::WORKLOADS, "exit_while_sampling.rb"),
                                                        how, *mode, env: { "DIR" => dir }, timeout: 60)
            what = "#{how} #{mode.join}"
            if expected == :TERM
              assert status.signaled?, what
              assert_equal Signal.list["TERM"], status.termsig, "#{what}: #{stderr}"
            else
              assert_clean_exit(status, stderr, what) if expected.zero?
              assert_equal expected, status.exitstatus, "#{what}: #{stderr}"
            end
            refute_match(/\[BUG\]|Segmentation|Profiling timer expired/, stderr, what)
            if how == "kill_threads"
              # Sonde's threads are not in Thread.list: killing "every other thread" leaves them be.
              assert_match(/running after the kill: true/, stderr, what)
              assert_match(/restarted: true true/, stderr, what)
            end
            runs += 1
          end
        end
      end
    end
    SondeStress.record("exit while sampling", processes: runs)
  end
end
