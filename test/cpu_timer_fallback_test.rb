# frozen_string_literal: true

require_relative "support/test_helper"

# When the kernel will not make a CPU timer, Sonde goes on without it: a
# policy that forbids timer_create (a seccomp profile, here a real seccomp
# filter) gives one warning and stats[:cpu_timers] false, and CPU time is
# then charged at each sample as in no-signals mode; a timer refused for one
# thread (a kernel limit) leaves that thread charged at its samples and the
# others timed. Never a failure to start, never a crash.
class CpuTimerFallbackTest < Minitest::Test
  include SondeTestHelper

  WARNING = /per-thread CPU timers are not available here \(timer_create: Operation not permitted\)/.freeze

  def self.launcher
    @launcher ||= begin
      dir = Dir.mktmpdir("sonde-seccomp")
      binary = File.join(dir, "deny_timer_create")
      source = File.join(SondeTestHelper::ROOT, "test", "support", "deny_timer_create.c")
      output, status = Open3.capture2e(RbConfig::CONFIG["CC"], "-O2", "-o", binary, source)
      raise "could not build the seccomp launcher: #{output}" unless status.success?

      Minitest.after_run { FileUtils.remove_entry(dir) }
      binary
    end
  end

  def setup
    # The filter knows x86_64's system call numbers only (deny_timer_create.c).
    skip "the seccomp launcher is written for x86_64" unless RbConfig::CONFIG["host_cpu"] == "x86_64"
    @dir = Dir.mktmpdir("sonde-fallback")
  end

  def teardown
    FileUtils.remove_entry(@dir) if @dir
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a ratio +0.0% to +0.0% of ±15%.
  statistical def test_a_policy_that_forbids_timers_falls_back_with_one_warning
    out = File.join(@dir, "bursty.pprof")
    stdout, stderr, status = Open3.capture3(self.class.launcher, RbConfig.ruby, "-I#{LIB}",
                                            File.join(WORKLOADS, "bursty_threads.rb"), out, "1.5")
    assert_succeeded status, stderr
    assert_equal 1, stderr.scan(WARNING).size, "one warning: #{stderr}"
    facts = JSON.parse(stdout.lines.last)
    profile = Sonde::Pprof.read(out)
    assert_go_pprof_reads(out)
    facts.fetch("threads").each do |name, thread|
      sampled = total(profile, "cpu-time") { |s| thread_name(s) == name } / 1e9
      assert_within thread["cpu"], sampled, 0.15, "#{name}'s CPU time, charged at its samples, vs its clock"
    end
  end

  def test_stats_say_timers_are_off_under_the_policy
    stdout, stderr, status = Open3.capture3(self.class.launcher, RbConfig.ruby, "-I#{LIB}", "-rsonde", "-rjson", "-e",
                                            <<~RUBY)
                                              Sonde.start
                                              t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
                                              x = 0
                                              x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 0.3
                                              puts JSON.generate(Sonde.stop.stats)
                                            RUBY
    assert_succeeded status, stderr
    stats = JSON.parse(stdout.lines.last)
    assert_equal false, stats["cpu_timers"]
    assert_operator stats["cpu_timer_failures"], :>=, 1
    assert_equal 0, stats["cpu_timer_signals"]
    assert_operator stats["cpu_samples"], :>, 0, "CPU still sampled, at each pass"
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 1.00-1.00x its bound (>=); "the untimed thread's CPU,
  # charged at its samples" +0.0% to +0.0% of ±15%.
  statistical def test_a_timer_refused_for_one_thread_leaves_it_charged_at_its_samples
    stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
      def cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      def burn(s) = (t = cpu; x = 0; x += 1 while cpu - t < s; x)
      Sonde.start(rate: 100)
      Sonde::Native::Testing.fail_timer_creation(11) # EAGAIN: a kernel limit, for threads born from now
      worker = Thread.new { Thread.current.name = "untimed"; burn(0.5); cpu }
      burn(0.5)
      worker_cpu = worker.value
      profile = Sonde.stop
      puts JSON.generate(stats: profile.stats, worker_cpu: worker_cpu)
      profile.write(ARGV.fetch(0, "#{@dir}/refused.pprof"))
    RUBY
    assert_succeeded status, stderr
    refute_match WARNING, stderr, "a refused timer is not a missing mechanism: no warning"
    facts = JSON.parse(stdout.lines.last)
    assert_equal true, facts["stats"]["cpu_timers"]
    assert_operator facts["stats"]["cpu_timer_failures"], :>=, 1
    profile = Sonde::Pprof.read("#{@dir}/refused.pprof")
    untimed = total(profile, "cpu-time") { |s| thread_name(s) == "untimed" } / 1e9
    assert_within facts["worker_cpu"], untimed, 0.15, "the untimed thread's CPU, charged at its samples"
  end
end
