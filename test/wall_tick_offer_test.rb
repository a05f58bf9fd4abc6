# frozen_string_literal: true

require_relative "support/test_helper"

# A busy GVL holder's wall ticks ride on its CPU-timer signals (the trigger
# offers the tick; the CPU signal's handler takes it with the stack it just
# read), falling back to a signal of their own when no CPU signal comes in
# time. Either way every tick gives a pass, and the holder's wall time goes
# to the code it runs.
class WallTickOfferTest < Minitest::Test
  include SondeTestHelper

  # The busy GVL holder of both tests: spins on the wall clock.
  SPIN = <<~RUBY
    def spin(seconds)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      x = 0
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      x
    end
  RUBY

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "ticks were lost" 0.86-1.12x its bound (>=); a bound
  # 1.01-1.02x its bound (>=); a bound 1.11-1.11x its bound (>=). CI (5 Dec 2026, 3.1 YJIT,
  # beside the untimed queue) twice counted 139-141 passes of 200 with 151 ticks sent: the
  # trigger itself got too little CPU to tick 100 times a second. So the count is asked only of
  # a run whose holder had its core (as below); the wall time is asked of every run.
  statistical def test_a_busy_holder_keeps_every_wall_tick_and_its_wall_time_where_it_runs
    Dir.mktmpdir do |dir|
      out = File.join(dir, "offer.pprof")
      stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
        #{SPIN}
        Sonde.start(rate: 100)
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        cpu_before = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
        spin(2.0)
        cpu_s = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu_before
        elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
        profile = Sonde.stop
        profile.write(#{out.inspect})
        puts JSON.generate(profile.stats.merge("elapsed" => elapsed, "cpu_s" => cpu_s))
      RUBY
      assert_succeeded status, stderr
      stats = JSON.parse(stdout.lines.last)
      skip "no CPU timers here (#{stats.inspect})" unless stats["cpu_timers"]

      ticks = stats.slice("samples", "signals_sent", "ticks_by_cpu_signal", "cpu_s", "elapsed")
      if stats["cpu_s"] / stats["elapsed"] >= MIN_CPU_SHARE
        assert_operator stats["samples"], :>=, 0.85 * stats["elapsed"] * 100, "ticks were lost: #{ticks}"
      end
      # Every pass came from a tick: its own signal, a CPU signal that took
      # the offer, or the idle helper; but the stop's own (catch-up) pass.
      assert_operator stats["signals_sent"] + stats["ticks_by_cpu_signal"] + stats["idle_requests"], :>=,
                      stats["samples"] - stats["catch_up_samples"]
      assert_equal stats["signals_received"],
                   stats.values_at("tick_signals", "cpu_signals", "stale_timer_signals", "foreign_signals").sum,
                   "an offered tick is not a signal of its own"

      profile = Sonde::Pprof.read(out)
      wall = total(profile, "wall-time")
      # However few the ticks, the passes that came carry the whole span.
      assert_operator wall / 1e9, :>=, 0.95 * stats["elapsed"], "the holder's wall time was lost: #{ticks}"
      spinning = total(profile, "wall-time") { |sample| in_function?(profile, sample, "Object#spin") }
      assert_operator spinning / wall.to_f, :>=, 0.9, "the holder's wall time is under the method it ran"
    end
  end

  # The busy thread's own CPU time over its wall time: below 0.9 the
  # machine's other work took its core part of the time, and its CPU-timer
  # signals are too few to carry every tick (the trigger signals the rest,
  # by design), so what the tests below check cannot be asked of the run.
  MIN_CPU_SHARE = 0.9

  def skip_unless_the_thread_had_its_core(facts)
    skip "no CPU timers here (#{facts.inspect})" unless facts.dig("busy", "cpu_timers")
    share = facts["cpu_s"] / facts["spin_s"]
    return if share >= MIN_CPU_SHARE

    skip "the busy thread had #{(share * 100).round}% of a core (the machine is busy): too few CPU signals to carry " \
         "every tick"
  end

  # Once offers keep being taken, the offer stands: the holder's CPU
  # signals take the ticks and the trigger wakes every 8 intervals only,
  # until the holder sleeps; then ticks go back to the idle helper's
  # passes, which soon find nothing moving (the trigger parks or backs
  # off), and no wall time is lost either way.
  # Statistical. Measured with the half-interval grace (4 Dec 2026, 3.1): 199 of 199 ticks by CPU
  # signal and 29 trigger wake-ups in 6 quiet runs and 6 beside one busy core; beside two busy
  # cores the thread had about 2/3 of a core and 47-86 of ~172 (CI saw 104 of 166 with 96
  # wake-ups, before the grace), which the CPU-share guard leaves out.
  statistical def test_a_standing_offer_spares_the_trigger_and_is_withdrawn_when_the_holder_sleeps
    stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
      #{SPIN}
      Sonde.start(rate: 100)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      cpu_before = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      spin(2.0)
      cpu_s = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu_before
      spin_s = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      busy = Sonde.stats
      sleep 0.5
      elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      profile = Sonde.stop
      wall = profile.decode.then { |d| d.samples.sum { |s| s.values[d.value_index("wall-time")] } }
      puts JSON.generate(busy: busy, after: profile.stats, elapsed: elapsed, wall_s: wall / 1e9,
                         cpu_s: cpu_s, spin_s: spin_s)
    RUBY
    assert_succeeded status, stderr
    facts = JSON.parse(stdout.lines.last)
    busy = facts["busy"]
    after = facts["after"]
    skip_unless_the_thread_had_its_core(facts)

    ticks = busy.slice("ticks_by_cpu_signal", "samples", "signals_sent", "trigger_wakeups", "offers_taken_late")
    assert_operator busy["ticks_by_cpu_signal"], :>=, 0.75 * busy["samples"], "the holder's CPU signals took the ticks: #{ticks}"
    assert_operator busy["standing_offers"], :>=, 1, "the offer stood"
    assert_operator busy["trigger_wakeups"], :<, 0.5 * busy["samples"], "the trigger woke for most ticks: #{ticks}"
    assert_operator busy["samples"], :>=, 0.85 * 200, "ticks were lost while the offer stood"
    # Withdrawn once the holder slept: the idle helper's passes took over,
    # until they found nothing moving and the trigger parked (3.3+) or
    # backed off (3.1/3.2).
    slept_passes = after["idle_requests"] - busy["idle_requests"]
    assert_operator slept_passes, :>=, 1, "the offer was withdrawn when the holder slept: #{after}"
    waited = RUBY_VERSION >= "3.3" ? after["trigger_parks"] - busy["trigger_parks"] : after["backoff_waits"] - busy["backoff_waits"]
    assert_operator waited, :>=, 1, "the trigger stopped ticking while the holder slept: #{after}"
    assert_in_delta facts["elapsed"], facts["wall_s"], 0.05 * facts["elapsed"], "the main thread's wall time"
  end

  # Issue 24's case: one thread burns CPU while the main thread waits in
  # Thread#join. In 2 runs of 8 its ticks all went by the trigger's signal
  # (about 6% of a core more), because its CPU signals fell in the wrong
  # phase of the interval; the half-interval grace fixed that. Five runs
  # here, each a process of its own, for the phase is fixed for a run.
  # Statistical. Measured (4 Dec 2026, quiet machine): 198-199 of 199 ticks by CPU signal on 3.1
  # (5 of 6 runs; the sixth began while the load of other work was still 2) and on 3.1 with YJIT
  # (6 of 6); before the grace, 2 runs of 40 had fewer than 50.
  statistical def test_a_busy_thread_beside_a_waiting_main_thread_has_its_ticks_by_its_own_cpu_signal
    runs = Array.new(5) do
      stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
        #{SPIN}
        Sonde.start(rate: 100)
        burner = Thread.new do
          started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          cpu_before = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
          spin(1.0)
          [Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu_before,
           Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
        end
        cpu_s, spin_s = burner.value
        busy = Sonde.stats
        Sonde.stop
        puts JSON.generate(busy: busy, cpu_s: cpu_s, spin_s: spin_s)
      RUBY
      assert_succeeded status, stderr
      JSON.parse(stdout.lines.last)
    end
    runs.each { |facts| skip_unless_the_thread_had_its_core(facts) }
    runs.each do |facts|
      busy = facts["busy"]
      ticks = busy.slice("ticks_by_cpu_signal", "samples", "signals_sent", "trigger_wakeups", "offers_taken_late")
      assert_operator busy["ticks_by_cpu_signal"], :>=, 0.75 * busy["samples"],
                      "in every run the burner's CPU signals took its ticks: #{ticks}"
    end
  end
end
