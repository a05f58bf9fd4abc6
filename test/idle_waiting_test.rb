# frozen_string_literal: true

require_relative "support/test_helper"

# Waiting costs nothing: while every thread waits, the trigger parks (Ruby
# 3.3+: until a thread takes the GVL again) or backs off (3.1/3.2: passes
# further and further apart, at most IDLE_BACKOFF_CAP apart), and each
# thread's wait is credited on the stack it waited on. The workloads know
# their truth: each thread's life in the run from the monotonic clock, the
# burner's CPU from its own thread clock, which method each wait is in.
class IdleWaitingTest < Minitest::Test
  include SondeTestHelper

  # Ruby 3.1/3.2 back off to a pass every 200 ms (scheduler.c,
  # IDLE_BACKOFF_CAP_NS): a thread's wake is seen at the pass after it, so
  # up to that much of a wait (plus one tick) can go to the stack the
  # thread has when seen. 3.3+ note the wake itself (the RESUMED event).
  BACKOFF_CAP = 0.2
  TICK = 0.01
  PARKS = RUBY_VERSION >= "3.3"
  # How much of a wait may land on the stack after it.
  MISPLACED = PARKS ? 2 * TICK : BACKOFF_CAP + 2 * TICK

  COMMON = <<~RUBY
    #{BURN_SCRIPT}
    def clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    def wait_before(seconds) = sleep(seconds)
    def wait_after(seconds) = sleep(seconds)
    def wait_forever = sleep
    def nap(seconds) = sleep(seconds)
    def main_waits(seconds) = sleep(seconds)
    # Until the queue has something, then seconds more.
    def main_waits_for(queue, seconds) = (queue.pop; sleep(seconds))
  RUBY

  # 32 threads asleep for 3 s, then one of them wakes and burns 0.5 s of
  # CPU, then sleeps again for 0.5 s; another ends after a 2-s wait; the
  # main thread sleeps throughout.
  # Statistical: wall times against the workload's own clock, read inside
  # each thread, on a loaded machine. CI's deterministic lane (nice 10
  # beside the timed queue) once read 2.021 s for the ender's 2.000 s life
  # (+1.05%, the bound being the issue's 1%): its truth is read just before
  # its block returns, and a descheduled thread ends later than that.
  statistical def test_32_sleeping_threads_and_one_that_wakes_to_burn
    profile, facts = run_profiled(<<~RUBY)
      ready = Queue.new
      done = Queue.new
      threads = Array.new(32) do |i|
        Thread.new do
          lives[i] = clock
          if i.zero?
            Thread.current.name = "burner"
            ready << true
            wait_before(3.0)
            facts["first_wait"] = clock - lives[i] # a sleep ends late on a busy machine
            cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
            burn_started = clock
            burn(0.5)
            facts["burn_wall"] = clock - burn_started
            facts["burned"] = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu
            wait_after(0.5)
            facts["last_wait"] = clock
            done << true
            wait_forever
          elsif i == 1
            Thread.current.name = "ender"
            ready << true
            wait_before(2.0)
            ended[i] = clock
          else
            Thread.current.name = "sleeper-\#{i}"
            ready << true
            wait_forever
          end
        end
      end
      32.times { ready.pop }
      facts["main_waits_from"] = clock
      main_waits_for(done, 0.5)
    RUBY
    stats = facts["stats"]
    assert_lives_sampled(profile, facts)

    main_wait = facts["lives"]["main"] - (facts["main_waits_from"] - facts["started"])
    assert_operator wall_in(profile, "main", "Object#main_waits_for"), :>=, main_wait - MISPLACED,
                    "main's wait is on the method it waits in: #{breakdown(profile, "main")}"
    # Their lives are their waits, but for a few lines at their start.
    { "sleeper-2" => "Object#wait_forever", "sleeper-31" => "Object#wait_forever", "ender" => "Object#wait_before" }.each do |name, method|
      assert_operator wall_in(profile, name, method), :>=, facts["lives"][name] - MISPLACED - 0.02,
                      "#{name}'s wait is on the method it waits in: #{breakdown(profile, name)}"
    end
    # The burner: 3 s on wait_before, its burn on burn, then wait_after.
    assert_within facts["first_wait"], wall_in(profile, "burner", "Object#wait_before"), MISPLACED / 3.0 + 0.01,
                  "the burner's first wait, on its stack: #{breakdown(profile, "burner")}"
    burn_wall = wall_in(profile, "burner", "Object#burn")
    assert_operator burn_wall, :>=, facts["burn_wall"] - 2 * TICK, "the burn's wall time: #{breakdown(profile, "burner")}"
    assert_operator burn_wall, :<=, facts["burn_wall"] + MISPLACED, "the burn's wall time: #{breakdown(profile, "burner")}"
    burn_cpu = total(profile, "cpu-time") { |s| thread_name(s) == "burner" && in_function?(profile, s, "Object#burn") } / 1e9
    assert_within facts["burned"], burn_cpu, 0.05, "the burner's CPU, on Object#burn"
    assert_operator wall_in(profile, "burner", "Object#wait_after"), :>=, 0.5 - 2 * TICK - MISPLACED,
                    "the burner's second wait, on its stack: #{breakdown(profile, "burner")}"
    last_wait = facts["lives"]["main"] - (facts["last_wait"] - facts["started"])
    assert_operator wall_in(profile, "burner", "Object#wait_forever"), :>=, last_wait - MISPLACED,
                    "the burner's last wait, on its stack"
    # Two stretches of waiting, each with its ramp of back-offs on 3.1.
    assert_idle_was_cheap(stats, idle_seconds: facts["lives"]["main"] - facts["burn_wall"], stretches: 2,
                                 busy_seconds: facts["burn_wall"])
  end

  # 32 threads that wake for 1 ms every 100 ms for 3 s.
  # Statistical, for the same reason (wall times against the threads' own clocks).
  statistical def test_32_threads_that_wake_for_a_millisecond_every_100_ms
    profile, facts = run_profiled(<<~RUBY)
      naps_done = {}
      threads = Array.new(32) do |i|
        Thread.new do
          lives[i] = clock
          Thread.current.name = "napper-\#{i}"
          deadline = clock + 3.0
          while clock < deadline
            nap(0.1)
            burn(0.001)
          end
          naps_done[i] = clock
          wait_forever
        end
      end
      main_waits(3.4)
      facts["naps"] = threads.each_with_index.to_h { |t, i| [t.name, naps_done[i] - lives[i]] }
    RUBY
    assert_lives_sampled(profile, facts)
    facts["naps"].each do |name, naps|
      # About 30 naps of 100 ms and 30 burns of 1 ms of CPU (more wall when
      # the machine is busy): at least 90% of the loop sleeps.
      napped = wall_in(profile, name, "Object#nap")
      assert_operator napped, :>=, 0.9 * naps, "#{name}'s naps, on Object#nap: #{breakdown(profile, name)}"
      assert_operator napped, :<=, naps + MISPLACED, "#{name}'s naps, on Object#nap: #{breakdown(profile, name)}"
      assert_operator wall_in(profile, name, "Object#wait_forever"), :>=, facts["lives"][name] - naps - MISPLACED,
                      "#{name}'s last wait: #{breakdown(profile, name)}"
    end
  end

  # The idle process itself: a few passes, not one per tick.
  # Statistical, for the same reason as the tests above: its threads' wall
  # times are held to their lives read inside each thread. CI's
  # deterministic lane on 3.3 (nice 10 beside the timed queue) once read
  # 3.041 s for a sleeper's 3.005 s (+1.2%, the bound being 1%). Likely
  # cause, not shown: the profile counts a thread from its birth (3.3+:
  # its READY event), its life from its first line, and a loaded machine
  # can put tens of milliseconds between the two.
  statistical def test_an_idle_process_makes_few_passes
    profile, facts = run_profiled(<<~RUBY)
      ready = Queue.new
      threads = Array.new(32) { |i| Thread.new { lives[i] = clock; Thread.current.name = "sleeper-\#{i}"; ready << 1; wait_forever } }
      32.times { ready.pop }
      main_waits(3.0)
    RUBY
    assert_lives_sampled(profile, facts)
    assert_idle_was_cheap(facts["stats"], idle_seconds: 3.0)
  end

  private

  # Runs body under Sonde at 100 Hz; body fills lives[i] with each thread's
  # birth (monotonic) and may add to facts. Returns the profile and the
  # facts, with each thread's life in the run by name.
  def run_profiled(body)
    Dir.mktmpdir do |dir|
      out = File.join(dir, "idle.pprof")
      stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
        #{COMMON}
        facts = {}
        lives = {}
        ended = {}
        # The main thread's life in the run starts at its baseline, inside
        # Sonde.start (which can take 0.2 s on a busy machine): between these two.
        before_start = clock
        Sonde.start(rate: 100)
        started = clock
        #{body}
        stopped = clock
        profile = Sonde.stop
        names = threads.each_with_index.to_h { |t, i| [t.name, (ended[i] || stopped) - lives[i]] }
        facts["lives"] = names.merge("main" => stopped - started)
        facts["started"] = started
        facts["main_life_at_most"] = stopped - before_start
        facts["stats"] = profile.stats
        profile.write(#{out.inspect})
        puts JSON.generate(facts)
      RUBY
      assert_succeeded status, stderr
      [Sonde::Pprof.read(out), JSON.parse(stdout.lines.last)]
    end
  end

  # Wall seconds by state and leaf frames, for failure messages.
  def breakdown(profile, name)
    parts = Hash.new(0)
    profile.samples.each do |s|
      next unless thread_name(s) == name

      parts["#{s.labels["state"]} #{function_names(profile, s).first(3).join("<")}"] += s.values[profile.value_index("wall-time")] / 1e9
    end
    parts.transform_values { |v| v.round(3) }.inspect
  end

  def wall_of(profile, name)
    total(profile, "wall-time") { |s| thread_name(s) == name } / 1e9
  end

  def wall_in(profile, name, function)
    total(profile, "wall-time") { |s| thread_name(s) == name && in_function?(profile, s, function) } / 1e9
  end

  # Every thread's sampled wall time is its life in the run, within 1%.
  def assert_lives_sampled(profile, facts)
    facts["lives"].each do |name, life|
      next if name == "main"

      assert_within life, wall_of(profile, name), 0.01, "#{name}'s wall time against its life in the run"
    end
    main = wall_of(profile, "main")
    assert_operator main, :>=, facts["lives"]["main"] * 0.99, "main's wall time against its life in the run"
    assert_operator main, :<=, facts["main_life_at_most"] * 1.01, "main's wall time against its life in the run"
  end

  # While everything waited: 3.3+ parked (no pass at all once parked),
  # 3.1/3.2 backed off to a pass every BACKOFF_CAP.
  def assert_idle_was_cheap(stats, idle_seconds:, stretches: 1, busy_seconds: 0)
    busy_passes = stats["samples"] - stats["idle_samples"]
    if PARKS
      assert_operator stats["idle_samples"], :<=, 6 * stretches, "passes while all waited: #{stats.inspect}"
      assert_operator stats["trigger_parks"], :>=, 1, stats.inspect
      assert_operator stats["trigger_parked_ns"] / 1e9, :>=, idle_seconds - 0.5, "parked while all waited: #{stats.inspect}"
    else
      # The ramp (20, 40, 80, 160 ms: 5 passes) and then one pass per cap.
      assert_operator stats["idle_samples"], :<=, idle_seconds / BACKOFF_CAP + 6 * stretches,
                      "passes while all waited: #{stats.inspect}"
      assert_operator stats["backoff_waits"], :>=, idle_seconds / BACKOFF_CAP / 2, stats.inspect
    end
    # A tick's pass each tick while something ran, and a few to see it end.
    assert_operator busy_passes, :<=, busy_seconds / TICK + 10, stats.inspect
  end
end
