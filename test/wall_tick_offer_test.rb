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
  # 1.01-1.02x its bound (>=); a bound 1.11-1.11x its bound (>=).
  statistical def test_a_busy_holder_keeps_every_wall_tick_and_its_wall_time_where_it_runs
    Dir.mktmpdir do |dir|
      out = File.join(dir, "offer.pprof")
      stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
        #{SPIN}
        Sonde.start(rate: 100)
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        spin(2.0)
        elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
        profile = Sonde.stop
        profile.write(#{out.inspect})
        puts JSON.generate(profile.stats.merge("elapsed" => elapsed))
      RUBY
      assert status.success?, stderr
      stats = JSON.parse(stdout.lines.last)
      skip "no CPU timers here (#{stats.inspect})" unless stats["cpu_timers"]

      asked = stats["elapsed"] * 100
      assert_operator stats["samples"], :>=, 0.85 * asked, "ticks were lost: #{stats.slice("samples", "signals_sent",
                                                                                               "ticks_by_cpu_signal")}"
      # Every pass came from a tick: its own signal, a CPU signal that took
      # the offer, or the idle helper; but the stop's own (catch-up) pass.
      assert_operator stats["signals_sent"] + stats["ticks_by_cpu_signal"] + stats["idle_requests"], :>=,
                      stats["samples"] - stats["catch_up_samples"]
      assert_equal stats["signals_received"],
                   stats.values_at("tick_signals", "cpu_signals", "stale_timer_signals", "foreign_signals").sum,
                   "an offered tick is not a signal of its own"

      profile = Sonde::Pprof.read(out)
      wall = total(profile, "wall-time")
      spinning = total(profile, "wall-time") { |sample| in_function?(profile, sample, "Object#spin") }
      assert_operator spinning / wall.to_f, :>=, 0.9, "the holder's wall time is under the method it ran"
    end
  end

  # Once offers keep being taken, the offer stands: the holder's CPU
  # signals take the ticks and the trigger wakes every 8 intervals only,
  # until the holder sleeps; then ticks go back to the idle helper's
  # passes, which soon find nothing moving (the trigger parks or backs
  # off), and no wall time is lost either way.
  # Statistical: it skipped in every run here (no wall tick offer was taken on this machine), so no
  # spread is measured yet for its bounds; measure them with SONDE_SPREAD_LOG where offers are taken.
  statistical def test_a_standing_offer_spares_the_trigger_and_is_withdrawn_when_the_holder_sleeps
    stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
      #{SPIN}
      Sonde.start(rate: 100)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      spin(2.0)
      busy = Sonde.stats
      sleep 0.5
      elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      profile = Sonde.stop
      wall = profile.decode.then { |d| d.samples.sum { |s| s.values[d.value_index("wall-time")] } }
      puts JSON.generate(busy: busy, after: profile.stats, elapsed: elapsed, wall_s: wall / 1e9)
    RUBY
    assert status.success?, stderr
    facts = JSON.parse(stdout.lines.last)
    busy = facts["busy"]
    after = facts["after"]
    skip "no CPU timers here (#{busy.inspect})" unless busy["cpu_timers"]
    # Seen on 3.1 with YJIT: the busy loop's CPU signals come only right
    # after a tick's own signal, so offers go untaken and none can stand
    # (ticks are signalled instead; the test above covers that they are
    # all kept).
    if busy["ticks_by_cpu_signal"] < busy["samples"] / 2
      skip "offers are not taken here (#{busy.slice("ticks_by_cpu_signal", "samples", "signals_sent")}): nothing to stand"
    end

    assert_operator busy["standing_offers"], :>=, 1, "the offer stood"
    assert_operator busy["trigger_wakeups"], :<, 0.5 * busy["samples"],
                    "the trigger woke for most ticks: #{busy.slice("trigger_wakeups", "samples", "ticks_by_cpu_signal")}"
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
end
