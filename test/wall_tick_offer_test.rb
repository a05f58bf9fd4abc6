# frozen_string_literal: true

require_relative "support/test_helper"

# A busy GVL holder's wall ticks ride on its CPU-timer signals (the trigger
# offers the tick; the CPU signal's handler takes it with the stack it just
# read), falling back to a signal of their own when no CPU signal comes in
# time. Either way every tick gives a pass, and the holder's wall time goes
# to the code it runs.
class WallTickOfferTest < Minitest::Test
  include SondeTestHelper

  def test_a_busy_holder_keeps_every_wall_tick_and_its_wall_time_where_it_runs
    Dir.mktmpdir do |dir|
      out = File.join(dir, "offer.pprof")
      stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
        def spin(seconds)
          deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
          x = 0
          x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
          x
        end
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
      # the offer, or the idle helper.
      assert_operator stats["signals_sent"] + stats["ticks_by_cpu_signal"] + stats["idle_requests"], :>=,
                      stats["samples"]
      assert_equal stats["signals_received"],
                   stats.values_at("tick_signals", "cpu_signals", "stale_timer_signals", "foreign_signals").sum,
                   "an offered tick is not a signal of its own"

      profile = Sonde::Pprof.read(out)
      wall = total(profile, "wall-time")
      spinning = total(profile, "wall-time") { |sample| in_function?(profile, sample, "Object#spin") }
      assert_operator spinning / wall.to_f, :>=, 0.9, "the holder's wall time is under the method it ran"
    end
  end
end
