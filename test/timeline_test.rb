# frozen_string_literal: true

require_relative "support/test_helper"

# timeline: true keeps each CPU and wall sample's moment beside the
# aggregate (pprof: the "end_timestamp_ns" number label), bounded per
# period. Checked against a workload that knows when each thread ran: two
# threads taking turns, then both contending for the GVL.
class TimelineTest < Minitest::Test
  include SondeTestHelper

  EDGE_NS = 20_000_000 # the issue's bound: within 20 ms of a turn's edges
  TIMESTAMP = "end_timestamp_ns"

  def setup
    skip "Sonde cannot run here: #{Sonde.unsupported_reason}" unless Sonde.supported?
  end

  def timed(profile)
    profile.samples.select { |sample| sample.labels.key?(TIMESTAMP) }
  end

  def turns_of(facts, thread)
    facts["turns"].select { |name, _, _| name == thread }.map { |_, from, to| (from..to) }
  end

  def within_a_turn?(turns, at)
    turns.any? { |turn| at >= turn.begin - EDGE_NS && at <= turn.end + EDGE_NS }
  end

  BURNERS = { "A" => "Object#burn_in_a", "B" => "Object#burn_in_b" }.freeze

  def burning_samples(profile, facts, thread)
    cpu = profile.value_index("cpu-time")
    timed(profile).select do |sample|
      thread_name(sample) == thread && in_function?(profile, sample, BURNERS.fetch(thread)) &&
        sample.values[cpu].positive? && sample.labels[TIMESTAMP] < facts["contended"][0]
    end
  end

  def test_each_burning_sample_falls_in_its_threads_turn
    profile, facts, path = taking_turns_recording
    wall = profile.value_index("wall-time")
    BURNERS.each do |thread, burner|
      turns = turns_of(facts, thread)
      burning = burning_samples(profile, facts, thread)
      refute_empty burning, "#{thread}'s CPU samples of #{burner}"
      outside = burning.reject { |sample| within_a_turn?(turns, sample.labels[TIMESTAMP]) }
      assert_empty outside.map { |sample| sample.labels[TIMESTAMP] }, "#{thread}'s #{burner} samples outside its turns"
      # While the other thread burns, this one's wall time is not running.
      others = turns_of(facts, thread == "A" ? "B" : "A")
      running_in_others = timed(profile).select do |sample|
        thread_name(sample) == thread && sample.labels["state"] == "running" && sample.values[wall].positive? &&
          others.any? { |turn| (turn.begin + EDGE_NS..turn.end - EDGE_NS).cover?(sample.labels[TIMESTAMP]) }
      end
      assert_empty running_in_others.map { |s| function_names(profile, s).first(3) },
                   "#{thread} running while the other thread had its turn"
    end
    assert_go_pprof_reads(path)
  end

  # Each turn holds its burner's CPU samples: as many as the CPU the thread
  # got in it (its own clock: on a loaded machine far less than 0.5 s)
  # makes. Statistical: a timer's ticks fall where the kernel's scheduler
  # lets them; measured 0.97 to 1.06 of the clock's CPU over 42 turns, on
  # a quiet machine and beside two busy cores (bound: 0.8 to 1.25).
  statistical def test_each_turn_holds_its_share_of_the_burners_samples
    profile, facts, = taking_turns_recording
    cpu = profile.value_index("cpu-time")
    BURNERS.each do |thread, burner|
      burning = burning_samples(profile, facts, thread)
      facts["turns"].select { |name, _, _, _| name == thread }.each_with_index do |(_, from, to, burned_ns), i|
        in_turn = burning.select { |sample| (from..to + EDGE_NS).cover?(sample.labels[TIMESTAMP]) }
        sampled = in_turn.sum { |sample| sample.values[cpu] }
        next if burned_ns < 50_000_000 # under 5 ticks' CPU: too few samples to compare

        assert_operator sampled, :<=, 1.25 * burned_ns, "#{thread}'s turn #{i + 1}: CPU of #{burner} in it"
        assert_operator sampled, :>=, 0.8 * burned_ns,
                        "#{thread}'s turn #{i + 1}: CPU of #{burner} in it (#{in_turn.size} samples) " \
                        "against the #{(burned_ns / 1e6).round} ms the thread's clock says"
      end
    end
  end

  # The moments are the epoch's, within the profile's period; and the
  # aggregate is whole: the timed samples are most of the totals here (the
  # log dropped nothing), and go tool pprof reads the file.
  def test_timestamps_are_epoch_nanoseconds_within_the_period
    profile, facts, = taking_turns_recording
    start = profile.time_nanos
    stop = start + profile.duration_nanos
    stamps = timed(profile).map { |sample| sample.labels[TIMESTAMP] }
    refute_empty stamps
    assert_operator stamps.min, :>=, start
    assert_operator stamps.max, :<=, stop
    assert_equal facts["timeline_samples"], stamps.size, "one pprof sample per logged moment"
    assert_equal 0, facts["timeline_dropped"]
    cpu = profile.value_index("cpu-time")
    timed_cpu = timed(profile).sum { |sample| sample.values[cpu] }
    assert_operator timed_cpu, :>=, 0.95 * total(profile, "cpu-time"), "the moments hold nearly all the CPU time"
  end

  def test_gvl_contention_shows_both_threads_waiting_in_turn
    skip "GVL waits are timed on Ruby 3.3+ only" if RUBY_VERSION < "3.3"
    profile, facts, = taking_turns_recording
    from, to = facts["contended"]
    wall = profile.value_index("wall-time")
    %w[A B].each do |thread|
      waits = timed(profile).select do |sample|
        thread_name(sample) == thread && sample.labels["state"] == "waiting for gvl" &&
          (from..to + EDGE_NS).cover?(sample.labels[TIMESTAMP])
      end
      waited = waits.sum { |sample| sample.values[wall] }
      # Each burns 0.6 s of wall time beside the other: about half of it queued.
      assert_operator waited, :>=, 0.15e9, "#{thread}'s wall time waiting for the GVL while both burned"
      # Ruby hands the GVL over every 100 ms, so each queues about 3 times;
      # each wait is one sample, ending when the thread got the GVL (a
      # thread queued for it is not sampled again until then). Two or more
      # say they took turns.
      assert_operator waits.size, :>=, 2, "#{thread}'s separate waits (taking turns, not one block)"
    end
  end

  # A thread that waits while another burns is not read again at each pass
  # (nothing about it changed): its wait is one timed sample on the stack
  # it waited on, counted as the passes it spanned, instead of one per pass.
  # A flush in the middle of the wait splits it where the period ends. The
  # workload knows its truth: when each wait began and ended, and when the
  # flush came, from the monotonic clock read inside the threads.
  # Statistical. Up to the flush every Ruby is exact (the flush's own pass);
  # after it, 3.1/3.2 see the wake at the next pass, and the part of the
  # wait since the last pass that found the thread waiting goes to the
  # stack after it: a tick on a quiet machine, more when the overhead
  # budget spaces out passes that a loaded machine made slow. Measured 3
  # runs each (7 Dec 2026, a quiet machine): 3.1 off by 0.1-9.3 ms, 3.3
  # and 3.4 by 0.1 ms at most; in a clean-clone CI run, 3.1's statistical
  # lane beside the untimed queue, 187 ms once (its retry passed). The
  # bound is TICKS_OF_SLACK ticks, 30 ms, and on 3.1/3.2 after the flush
  # LATE_WAKE_SLACK, 250 ms: the 200-ms back-off cap's order, which the
  # docs give as what a wake seen late can move (overhead.md).
  TICKS_OF_SLACK = 3
  LATE_WAKE_SLACK = 0.25
  MOST_WAIT_SAMPLES = 3
  MOST_WAIT_SAMPLES_BY_CLOCK = 5
  WAIT = 1.0

  statistical def test_a_wait_among_busy_threads_is_one_sample_split_at_a_flush
    Dir.mktmpdir do |dir|
      stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
        #{BURN_SCRIPT}
        def clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        def wait_long(seconds) = sleep(seconds)
        facts = {}
        Sonde.start(rate: 100, timeline: true)
        waiter = Thread.new do
          Thread.current.name = "waiter"
          facts["began"] = clock
          wait_long(#{WAIT})
          facts["ended"] = clock
          burn(0.05)
        end
        burn(0.5)
        facts["flushed"] = clock
        Sonde.flush.write(#{File.join(dir, "first.pprof").inspect})
        # Busy until the wait is over: passes at the rate all along (while
        # every thread waits, the trigger parks or backs off instead).
        burn(0.01) until facts["ended"]
        waiter.join
        profile = Sonde.stop
        profile.write(#{File.join(dir, "second.pprof").inspect})
        puts JSON.generate(facts.merge("stats" => profile.stats))
      RUBY
      assert_succeeded status, stderr
      facts = JSON.parse(stdout.lines.last)
      tick = 0.01
      slack = TICKS_OF_SLACK * tick
      # The sleep lasts WAIT seconds; "ended" comes later, once the waiter
      # has the GVL back from the burning main thread (up to 100 ms on).
      truths = { "first.pprof" => facts["flushed"] - facts["began"],
                 "second.pprof" => facts["began"] + WAIT - facts["flushed"] }
      truths.each do |file, truth|
        profile = Sonde::Pprof.read(File.join(dir, file))
        wall = profile.value_index("wall-time")
        waits = timed(profile).select do |sample|
          thread_name(sample) == "waiter" && in_function?(profile, sample, "Object#wait_long") &&
            sample.labels["state"] == "sleeping"
        end
        waited = waits.sum { |sample| sample.values[wall] } / 1e9
        bound = file == "second.pprof" && RUBY_VERSION < "3.3" ? LATE_WAKE_SLACK : slack
        assert_in_delta truth, waited, bound, "the waiter's wait in #{file} (#{waits.size} timed samples)"
        # The first pass that found it waiting, one sample for every pass
        # that deferred it, the flush's own pass: not one per pass (a
        # half-second wait spans about 50). On 3.1/3.2 only the CPU clock
        # tells whether the thread ran, and any CPU it uses inside the sleep
        # ends a deferral: a clean-clone CI run (3.1, beside the untimed
        # queue) saw 4 once, its retry passed; 3 at most everywhere else.
        most = RUBY_VERSION < "3.3" ? MOST_WAIT_SAMPLES_BY_CLOCK : MOST_WAIT_SAMPLES
        assert_operator waits.size, :<=, most, "the waiter's wait in #{file} is one sample, not one per pass"
        # Counted as the passes it spanned (tens of them), not as one each.
        samples = waits.sum { |sample| sample.values[profile.value_index("wall-samples")] }
        assert_operator samples, :>, 2 * waits.size, "the wait counts as the passes it spanned in #{file}"
      end
      assert_operator facts["stats"]["wall_samples_deferred"], :>=, 50, facts["stats"].inspect
    end
  end

  # The stop reads its period's end before it halts; CPU signals taken
  # meanwhile (a loaded machine stretches the halt) are still recorded, so
  # the period stretches to hold their moments: pprof and OTLP readers
  # take every moment to lie within it (OTLP's span excludes its end).
  # Testing.burn_at_stop widens that window to 60 ms of CPU.
  def test_samples_taken_while_the_stop_halts_lie_within_the_period
    script = <<~RUBY
      require "sonde"
      require "json"
      Sonde.start(rate: 1000)
      Sonde::Native::Testing.burn_at_stop(0.06)
      profile = Sonde::Pprof.decode(Sonde.stop.pprof)
      moments = profile.samples.filter_map { |sample| sample.labels["#{TIMESTAMP}"] }
      puts JSON.generate(start: profile.time_nanos, end: profile.time_nanos + profile.duration_nanos,
                         first: moments.min, last: moments.max, stats: Sonde.stats.slice(:cpu_signals, :cpu_samples))
    RUBY
    stdout, stderr, status = run_ruby("-e", script)
    assert_succeeded status, stderr
    facts = JSON.parse(stdout.lines.last)
    assert_operator facts["stats"]["cpu_samples"], :>, 0, "CPU samples during the stop's burn: #{facts}"
    assert_operator facts["first"], :>=, facts["start"], facts.to_s
    assert_operator facts["last"], :<, facts["end"], "the latest moment vs the period's end: #{facts}"
  end

  # The same short run with and without a timeline: only the first has
  # moments (a burn of 0.3 s makes about 60 CPU and wall samples).
  def test_without_a_timeline_no_sample_has_a_moment
    [true, false].each do |timeline|
      stdout, stderr, status = run_ruby("-e", <<~RUBY)
        require "json"
        require "sonde"
        #{BURN_SCRIPT}
        Sonde.start(rate: 100, timeline: #{timeline})
        burn(0.3)
        profile = Sonde.stop
        puts JSON.generate(timeline_samples: profile.stats[:timeline_samples], pprof: [profile.pprof].pack("m0"))
      RUBY
      assert_succeeded status, stderr
      facts = JSON.parse(stdout.lines.last)
      moments = timed(Sonde::Pprof.decode(facts["pprof"].unpack1("m0")))
      if timeline
        refute_empty moments, "the control, timeline: true"
        assert_equal facts["timeline_samples"], moments.size
      else
        assert_empty moments
        assert_equal 0, facts["timeline_samples"]
      end
    end
  end

  def test_continuous_mode_keeps_no_timeline_unless_asked
    refute Sonde::Options.new(continuous: true, environment: {}).timeline
    assert Sonde::Options.new(continuous: true, timeline: true, environment: {}).timeline
    assert Sonde::Options.new(environment: {}).timeline
    refute Sonde::Options.new(environment: { "SONDE_TIMELINE" => "0" }).timeline
    assert Sonde::Options.new(continuous: true, environment: { "SONDE_TIMELINE" => "1" }).timeline
    error = assert_raises(Sonde::ArgumentError) { Sonde::Options.new(timeline: "yes", environment: {}) }
    assert_match(/timeline must be true or false/, error.message)
  end

  def test_sonde_record_keeps_moments_unless_told_not_to
    Dir.mktmpdir do |dir|
      script = File.join(dir, "burn.rb")
      File.write(script, "#{BURN_SCRIPT}\nburn(0.2)\n")
      { [] => true, ["--no-timeline"] => false }.each do |flags, expected|
        out = File.join(dir, "out.pprof")
        _stdout, stderr, status = run_sonde("record", *flags, "-o", out, "--", RbConfig.ruby, script)
        assert_succeeded status, stderr
        assert_equal expected, !timed(Sonde::Pprof.read(out)).empty?, "sonde record #{flags.join(" ")}"
      end
    end
  end

  def test_a_debug_pprof_capture_keeps_moments
    stdout, stderr, status = run_ruby("-rsonde/pprof_app", "-e", <<~RUBY)
      #{BURN_SCRIPT}
      # The burner burns until the capture is over: beside a thread that
      # holds the GVL, loading the app and starting Sonde take the GVL back
      # only every 100 ms, and a burn of fixed length was over before the
      # capture began (3.4, every run).
      done = false
      app = Sonde::PprofApp.new(token: "t0ken-for-tests")
      burner = Thread.new { burn(0.05) until done }
      _, _, body = app.call({ "REQUEST_METHOD" => "GET", "PATH_INFO" => "/profile",
                              "QUERY_STRING" => "seconds=1&token=t0ken-for-tests", "REMOTE_ADDR" => "10.1.2.3" })
      done = true
      burner.join
      $stdout.binmode
      $stdout.write(body.join)
    RUBY
    assert_succeeded status, stderr
    refute_empty timed(Sonde::Pprof.decode(stdout))
  end

  # At its bound the log keeps the newest moments and counts the rest; the
  # aggregate keeps every sample's values (the dropped ones untimed).
  def test_at_the_bound_the_oldest_moments_are_dropped_and_counted
    stdout, stderr, status = run_ruby("-e", <<~RUBY)
      require "json"
      require "sonde"
      #{BURN_SCRIPT}
      Sonde.start(rate: 100)
      Sonde::Native::Testing.bound_timeline(50)
      started = Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
      burn(1.0)
      profile = Sonde.stop
      File.binwrite(ARGV[0] || "/dev/null", profile.pprof)
      puts JSON.generate(started: started, stats: profile.stats.slice(:timeline_samples, :timeline_dropped),
                         pprof: [profile.pprof].pack("m0"))
    RUBY
    assert_succeeded status, stderr
    facts = JSON.parse(stdout.lines.last)
    profile = Sonde::Pprof.decode(facts["pprof"].unpack1("m0"))
    stamps = timed(profile).map { |sample| sample.labels[TIMESTAMP] }
    assert_operator stamps.size, :<=, 50
    assert_operator stamps.size, :>=, 40
    assert_operator facts["stats"]["timeline_dropped"], :>, 0
    assert_equal facts["stats"]["timeline_samples"] - facts["stats"]["timeline_dropped"], stamps.size
    # The newest kept: 50 moments are the last few tenths of the second.
    assert_operator stamps.min, :>, facts["started"] + 500_000_000
    # The aggregate is whole: 50 moments hold about 0.25 s of CPU at most.
    assert_operator total(profile, "cpu-time"), :>=, 0.8e9
  end
end
