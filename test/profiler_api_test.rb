# frozen_string_literal: true

require_relative "support/test_helper"

# The Ruby API: lifecycle, options, errors, stats, failures.
class ProfilerApiTest < Minitest::Test
  include SondeTestHelper

  def teardown
    Sonde.stop if Sonde::Native.loaded? && Sonde::Native.active?
  rescue Sonde::SamplingError
    nil
  end

  def spin(seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    x
  end

  # Spins until the calling thread has used seconds of CPU.
  def burn_cpu(seconds)
    deadline = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + seconds
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
    x
  end

  def test_supported_on_this_machine
    assert Sonde.supported?, Sonde.unsupported_reason
    assert_nil Sonde.unsupported_reason
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 2.40-4.00x its bound (>); a bound 1.34-1.35x its
  # bound (>); a difference -0.207 to -0.201 of ±5; a bound 1.34-1.35x its bound (>).
  statistical def test_start_stop_start_again
    2.times do
      assert Sonde.start(rate: 200)
      assert Sonde.running?
      spin(0.2)
      profile = Sonde.stop
      refute Sonde.running?
      assert_kind_of Sonde::Profile, profile
      # 40 ticks; under 3.1's YJIT passes run only at the rare safe points
      # its compiled loop reaches (8 seen in one CI run), see below.
      assert_operator profile.stats[:samples], :>, yjit_on_ruby31? ? 0 : 10
      assert_operator profile.duration, :>, 0.15
      assert_equal "\x1f\x8b".b, profile.pprof.byteslice(0, 2), "gzip'd"
      decoded = profile.decode
      # gvl-wait-time where the GVL hooks time it (Ruby 3.3+).
      gvl = Sonde::Platform.backend == :public_api ? [%w[gvl-wait-time nanoseconds]] : []
      assert_equal [%w[cpu-time nanoseconds], %w[cpu-samples count], %w[wall-time nanoseconds],
                    %w[wall-samples count]] + gvl, decoded.sample_types
      assert_equal ["wall-time", "nanoseconds"], decoded.period_type
      assert_equal 5_000_000, decoded.period
      assert_in_delta Time.now.to_f, decoded.time_nanos / 1e9, 5
      assert_operator decoded.duration_nanos, :>, 150_000_000
    end
  end

  def test_stop_without_start_is_a_clear_error
    error = assert_raises(Sonde::StateError) { Sonde.stop }
    assert_match(/not running/, error.message)
  end

  def test_start_twice_is_a_clear_error
    Sonde.start
    error = assert_raises(Sonde::StateError) { Sonde.start }
    assert_match(/already running/, error.message)
    assert Sonde.running?, "the first run goes on"
  end

  # Sonde.profile where always-on profiling runs (a console under
  # RUBYOPT=-rsonde/auto): it used to raise "already running", and the
  # StateError's advice, Sonde.stop, ended the always-on run. The block's
  # period is now cut out of that run, which goes on, exported like any
  # other, and written to out: even when the block raises. Exact checks
  # (periods, files, refusals); the CPU bound is loose on purpose: the
  # block burns 0.3 s of its thread's CPU and any period that held it has
  # more than 0.1 s. (It spun 0.3 s of wall time before, and a clean-clone
  # CI run's 3.4 leg, beside three others on two cores, got 30 ms of CPU.)
  def test_profile_inside_continuous_mode_cuts_the_blocks_period
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, every: 60, export: "dir:#{dir}", service: "console")
      out = File.join(dir, "block.pprof")
      profile = Sonde.profile(out: out) { burn_cpu(0.3) }
      assert Sonde.running?, "the continuous run goes on"
      decoded = Sonde::Pprof.read(out)
      assert_operator total(decoded, "cpu-time"), :>, 0.1e9, "the block's CPU is in its profile"
      error = assert_raises(Sonde::StateError) { Sonde.profile(rate: 1000) { spin(0.01) } }
      assert_equal "Sonde runs in continuous mode here; Sonde.profile takes the block's period out of that run, " \
                   "with the run's settings: rate: 100 (given rate: 1000)", error.message
      raised = File.join(dir, "raised.pprof")
      assert_raises(RuntimeError) { Sonde.profile(out: raised) { raise "the block failed" } }
      assert File.exist?(raised), "written although the block raised"
      Sonde.stop
      periods = Dir[File.join(dir, "console-*.pprof")].map { |path| Sonde::Pprof.read(path) }.sort_by(&:time_nanos)
      assert_includes periods.map { |p| [p.time_nanos, p.duration_nanos] }, [decoded.time_nanos, decoded.duration_nanos],
                      "the block's profile is one of the exported periods"
      assert_in_delta profile.duration, decoded.duration_nanos / 1e9, 1e-6
      periods.each_cons(2) do |earlier, later|
        assert_in_delta earlier.time_nanos + earlier.duration_nanos, later.time_nanos, 5_000_000, "no gap between periods"
      end
    end
  end

  def test_bad_options_name_the_option_and_what_is_accepted
    {
      { rate: 0 } => /rate must be an Integer from 1 to 5000.*got 0/,
      { rate: "100" } => /rate must be an Integer.*got "100" \(String\)/,
      { rate: 10.5 } => /rate must be an Integer/,
      { max_frames: 0 } => /max_frames must be an Integer from 1 to 10000/,
      { max_frames: nil } => /max_frames must be an Integer.*got nil/,
      { signals: "no" } => /signals must be true or false/,
      { rates: 10 } => /unknown option :rates; accepted: :rate, :max_frames, :signals, :overhead_target, :gc/,
    }.each do |options, message|
      error = assert_raises(Sonde::ArgumentError, options.inspect) { Sonde.start(**options) }
      assert_match message, error.message
      refute Sonde.running?
    end
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 2.34-3.00x its bound (>); a bound 0.92-1.00x its
  # bound (<=); "a handler takes microseconds (0.3 s at 500 Hz)" 0.02-0.03x its bound (<); a bound
  # 0.21-0.47x its bound (<=); a bound 0.04-0.12x its bound (<=); a bound 1.00-1.01x its bound (>=).
  statistical def test_stats_while_running_and_after
    assert_kind_of Hash, Sonde.stats
    Sonde.start(rate: 500)
    spin(0.3)
    stats = Sonde.stats
    %i[samples signals_sent signals_received tick_signals cpu_signals wrong_thread_signals sampling_time_ns_min
       sampling_time_ns_avg sampling_time_ns_max sampling_time_ns_total sampling_time_ns_p50 sampling_time_ns_p90
       sampling_time_ns_p99].each do |key|
      assert_kind_of Integer, stats[key], key.to_s
    end
    # With YJIT on 3.1 the passes run at the safe points YJIT's compiled
    # loop reaches, which can be rare: 4 and 31 of 150 seen in two runs
    # (open: see the stop's closing note). Everywhere else, most ticks.
    assert_operator stats[:samples], :>, yjit_on_ruby31? ? 0 : 50
    # Ticks are the trigger's signals; CPU-timer signals come from the kernel on their own.
    assert_operator stats[:tick_signals], :<=, stats[:signals_sent]
    assert_equal stats[:signals_received],
                 stats[:tick_signals] + stats[:cpu_signals] + stats[:stale_timer_signals] + stats[:foreign_signals]
    assert_operator stats[:cpu_signals], :>, 0
    assert_kind_of Float, stats[:signal_handler_seconds]
    assert_operator stats[:signal_handler_seconds], :>, 0, "time in the handler is counted"
    assert_operator stats[:signal_handler_seconds], :<, 0.03, "a handler takes microseconds (0.3 s at 500 Hz)"
    assert_operator stats[:sampling_time_ns_min], :<=, stats[:sampling_time_ns_avg]
    assert_operator stats[:sampling_time_ns_avg], :<=, stats[:sampling_time_ns_max]
    # Quantiles are their bucket's upper bound: at most 1/16 above a pass's time.
    quantiles = %i[sampling_time_ns_p50 sampling_time_ns_p90 sampling_time_ns_p99].map { |key| stats[key] }
    assert_equal quantiles.sort, quantiles, "p50 <= p90 <= p99"
    assert_operator quantiles.first, :>=, stats[:sampling_time_ns_min]
    assert_operator quantiles.last, :<=, stats[:sampling_time_ns_max] * 17 / 16
    final = Sonde.stop.stats
    assert_equal final, Sonde.stats
    assert_operator final[:samples], :>=, stats[:samples]
  end

  def test_cpu_samples_add_up_to_the_stats
    Sonde.start(rate: 500)
    spin(0.3)
    profile = Sonde.stop
    decoded = profile.decode
    assert_equal profile.stats[:cpu_samples], total(decoded, "cpu-samples")
    assert_equal profile.stats[:thread_samples], total(decoded, "wall-samples")
  end

  def test_profile_block_writes_the_file
    Dir.mktmpdir do |dir|
      out = File.join(dir, "block.pprof")
      profile = Sonde.profile(out: out, rate: 200) { spin(0.2) }
      refute Sonde.running?
      assert_equal profile.pprof, File.binread(out)
      assert_go_pprof_reads(out)
    end
  end

  def test_profile_block_checks_the_output_path_before_running
    ran = false
    error = assert_raises(Sonde::ArgumentError) { Sonde.profile(out: "/nonexistent/dir/x.pprof") { ran = true } }
    assert_match %r{directory /nonexistent/dir does not exist}, error.message
    refute ran
    refute Sonde.running?
  end

  def test_profile_block_stops_and_writes_when_the_block_raises
    Dir.mktmpdir do |dir|
      out = File.join(dir, "raise.pprof")
      assert_raises(ZeroDivisionError) { Sonde.profile(out: out) { 1 / 0 } }
      refute Sonde.running?
      assert File.exist?(out)
    end
  end

  def test_a_failure_while_sampling_stops_the_profiler_and_is_reported_by_stop
    stdout, stderr, status = run_ruby("-rsonde", "-e", <<~RUBY)
      Sonde.start(rate: 500)
      sleep 0.05
      Sonde::Native::Testing.fail_next_sample
      x = 0
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.3
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      puts "app finished: \#{Sonde.running?}"
      begin
        Sonde.stop
      rescue Sonde::SamplingError => e
        puts "stop raised: \#{e.message}"
        puts "cause: \#{e.cause.class}"
        puts "partial profile: \#{e.profile.pprof.bytesize > 0}"
      end
      Sonde.start
      puts "restarted: \#{Sonde.running?}"
      Sonde.stop
    RUBY
    assert_succeeded status, stderr
    assert_includes stdout, "app finished: false"
    assert_match(/stop raised: sampling failed.*forced by Sonde::Native/, stdout)
    assert_includes stdout, "cause: RuntimeError"
    assert_includes stdout, "partial profile: true"
    assert_includes stdout, "restarted: true"
    assert_match(/sonde: sampling failed, so profiling stopped \(the application goes on\)/, stderr)
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 11.40-12.00x its bound (>).
  # The trigger never rests in no-signals mode (no thread-end hook runs
  # there): a thread that ends keeps its wall time up to its last tick
  # (before, parked on 3.3+, the sleeper kept 0.01 s of its 0.3).
  statistical def test_no_signals_mode_sends_no_signal_and_still_samples
    Sonde.start(rate: 200, signals: false)
    reader, writer = IO.pipe
    born = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    sleeper = Thread.new { reader.read }
    sleep 0.3
    sleeper_tid = sleeper.native_thread_id
    writer.close
    sleeper.join
    life = Process.clock_gettime(Process::CLOCK_MONOTONIC) - born
    profile = Sonde.stop
    stats = profile.stats
    assert_equal 0, stats[:signals_sent]
    assert_equal false, stats[:signals]
    assert_operator stats[:samples], :>, 5
    assert_equal 0, stats[:trigger_parks].to_i + stats[:backoff_waits].to_i, "no rest in no-signals mode"
    decoded = profile.decode
    wall = decoded.value_index("wall-time")
    sleeper_wall = decoded.samples.select { |s| s.labels["thread id"] == sleeper_tid }.sum { |s| s.values[wall] } / 1e9
    # One tick (5 ms) at either end, and a late tick on a loaded machine.
    assert_in_delta life, sleeper_wall, 0.05, "the sleeper's wall time against its life"
  end
end
