# frozen_string_literal: true

require_relative "stress_helper"

# Proves that fork and exec are safe while sampling at 1000 Hz:
# - a fork storm: 50 forks (short: 15) through fork, Process.fork and
#   IO.popen("-"), every third child forking a grandchild while one of its
#   own threads runs; children and grandchildren end by Sonde.stop + exit,
#   by exit with Sonde running, or by exit!. Every one of them samples
#   (Sonde.running? in the child) and exits with status 0, never a signal;
# - exec into a non-Ruby program (`sh -c 'exit 3'`, /bin/true), from the
#   main thread and from another thread, 20 times each (short: 5), and
#   from forked children: the program's own status every time, never death
#   by SIGPROF ("Profiling timer expired");
# - system and spawn of the same programs from a sampling process;
# - forks while another thread is inside Sonde.start or Sonde.stop: a child
#   in which Sonde is active samples, in continuous mode with a flusher of
#   its own, and one forked during a stop stays stopped (regression: the
#   child restarted without its flusher, or from options not set yet).
class ForkStormTest < Minitest::Test
  include SondeStress::Assertions

  def test_fork_storm_every_child_and_grandchild_exits_normally
    forks = SondeStress.size(15, 50)
    facts, stderr, status = SondeStress.run_workload("fork_storm", forks.to_s)
    assert_clean_exit(status, stderr, "fork storm parent")
    assert_empty stderr

    statuses = facts["statuses"]
    reports = facts["reports"]
    children = reports.select { |r| r["kind"] == "child" }
    grandchildren = reports.select { |r| r["kind"] == "grandchild" }
    grandchild_statuses = children.filter_map { |r| r["grandchild"] }
    SondeStress.record("fork storm", forks: forks, grandchildren: grandchild_statuses.size,
                                     seconds: facts["seconds"].round(2), parent_samples: facts["parent_samples"],
                                     child_samples: children.filter_map { |r| r["samples"] })

    assert_equal forks, statuses.size
    (statuses + grandchild_statuses).each do |s|
      assert_nil s["termsig"], "pid #{s["pid"]} died of signal #{s["termsig"]}"
      assert_equal 0, s["exitstatus"], "pid #{s["pid"]} exited #{s["exitstatus"]}"
    end
    assert_equal forks, children.size, "every child reports"
    assert_equal (forks + 2) / 3, grandchildren.size, "every grandchild reports"
    assert_equal grandchildren.size, grandchild_statuses.size
    assert(reports.all? { |r| r["running"] }, "every child and grandchild samples: #{reports.reject { |r| r["running"] }}")
    assert(children.filter_map { |r| r["samples"] }.all?(&:positive?), "children that stopped Sonde had samples")
    assert_operator facts["parent_samples"], :>, 0
    assert_equal forks / 4, facts["popen_outputs"].size
  end

  def test_exec_into_a_non_ruby_program_never_dies_of_sigprof
    repeats = SondeStress.size(5, 20)
    programs = [[["sh", "-c", "exit 3"], 3], [["/bin/true"], 0]]
    runs = 0
    started = SondeStress.now
    repeats.times do
      programs.each do |argv, expected|
        %w[exec thread_exec].each do |mode|
          _stdout, stderr, status = SondeStress.run_ruby(File.join(SondeStress::WORKLOADS, "exec.rb"), mode, *argv,
                                                         timeout: 60)
          refute status.signaled?, "#{mode} #{argv.join(" ")} died of signal #{status.termsig}: #{stderr}"
          assert_equal expected, status.exitstatus, "#{mode} #{argv.join(" ")}: #{stderr}"
          refute_match(/Profiling timer expired/, stderr)
          runs += 1
        end
      end
    end
    SondeStress.record("exec", execs: runs, seconds: (SondeStress.now - started).round(2))
  end

  def test_forked_children_exec_and_system_and_spawn_while_sampling
    repeats = SondeStress.size(5, 20)
    %w[fork_exec system].each do |mode|
      facts, stderr, status = SondeStress.run_workload("exec", mode, repeats.to_s, timeout: 120)
      assert_clean_exit(status, stderr, mode)
      expected = mode == "fork_exec" ? [3] * repeats : [3, 0] * repeats
      assert_equal expected, facts["statuses"].map { |s| s["termsig"] ? "signal #{s["termsig"]}" : s["exitstatus"] }, mode
      assert_operator facts["samples"], :>, 0
      SondeStress.record("exec #{mode}", processes: expected.size, samples: facts["samples"])
    end
  end

  def test_fork_while_another_thread_starts_or_stops_sonde
    children = SondeStress.size(100, 300)
    Dir.mktmpdir do |dir|
      [[], ["continuous"]].each do |mode|
        facts, stderr, status = SondeStress.run_workload("fork_during_start", children.to_s, *mode,
                                                         env: { "DIR" => dir }, timeout: 120)
        assert_clean_exit(status, stderr, "fork during start #{mode.join}")
        refute_match(/could not restart/, stderr)
        seen = facts["seen"]
        SondeStress.record("fork during start/stop #{mode.first || "one-shot"}", children: children,
                                                                                   start_stop_cycles: facts["cycles"],
                                                                                   seen: seen)
        assert_equal children, seen.values.sum, "every child reports"
        assert_equal [], seen.keys - %w[sampling inactive], "what children saw: #{seen}"
      end
    end
  end
end
