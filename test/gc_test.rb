# frozen_string_literal: true

require_relative "support/test_helper"

# GC time: recorded as a "Garbage Collection" frame with GC labels, matching
# what Ruby itself measured, and not charged again to the thread's frames.
class GcTest < Minitest::Test
  include SondeTestHelper

  def setup
    @dir = Dir.mktmpdir("sonde-gc")
  end

  def teardown
    FileUtils.remove_entry(@dir)
  end

  def gc_samples(profile)
    profile.samples.select { |s| function_names(profile, s) == ["Garbage Collection"] }
  end

  # Statistical. On 3.3+ GC's CPU time is the CPU samples that landed in GC
  # (about 4 ms each at the kernel's tick), so its error is a sampling one:
  # with 300,000 strings (about 20 GC samples) 8 idle runs on 3.4 measured
  # -22% to +14% of ±25%, and a CI run failed at -31% then -26%. With
  # 1,000,000 (70 to 250 GC samples), 7 Dec 2026, SONDE_SPREAD_LOG +
  # script/spread: "GC cpu-time vs GC.stat(" -9.2% to +5.7% (3.4, 8 idle
  # runs), -14.9% to +9.1% (3.1, 3.3, 3.4, 12 runs beside two busy loops),
  # -5.2% to +6.7% (3.3 and 3.4, 6 idle runs), of ±25%; "the workload must
  # really exercise the GC" 14.6-49.0x its bound (>); the main thread's
  # cpu-time -0.4% to 0.0% of ±15%; "GC steps are merged" 3.9-13.3x its
  # bound (>); 3.1's "GCs counted (GC.count)" 9.6x its bound (>) and "at
  # most one GC record per pass" 0.81-0.88x its bound (<=).
  statistical def test_gc_time_matches_what_ruby_measured_and_is_not_counted_twice
    out = File.join(@dir, "gc.pprof")
    facts = run_workload("allocation_heavy", out, "true")
    profile = Sonde::Pprof.read(out)
    assert_go_pprof_reads(out)

    gc = gc_samples(profile)
    refute_empty gc
    gc_cpu_ms = gc.sum { |s| s.values[profile.value_index("cpu-time")] } / 1e6
    assert_operator facts["gc_ms"], :>, 20, "the workload must really exercise the GC"
    assert_within facts["gc_ms"], gc_cpu_ms, 0.25, "GC cpu-time vs GC.stat(:time)"

    gc.each do |sample|
      assert_equal "gc", sample.labels["state"]
      assert_includes %w[major minor], sample.labels["gc type"]
      assert_includes %w[newobj malloc method capi stress force other], sample.labels["gc reason"]
      assert_equal "main", sample.labels["thread name"]
    end
    assert_includes gc.map { |s| s.labels["gc reason"] }, "method", "GC.start is a GC by method"

    # The main thread's CPU time is split between its own frames and GC,
    # never counted in both: together they are what its CPU clock says.
    main_cpu = total(profile, "cpu-time") { |s| thread_name(s) == "main" } / 1e9
    assert_within facts["main_cpu"], main_cpu, 0.15, "main thread's cpu-time (frames + GC) vs its CPU clock"
    stats = facts["stats"]
    if Sonde::Platform.backend == :public_api
      # 3.3+: a GC hook sees every GC step; many steps make one record.
      assert_operator stats["gc_events"], :>, stats["gc_samples"], "GC steps are merged"
    else
      # 3.1/3.2: no hook (it would slow every allocation); GC time is read
      # once per pass, so at most one record per pass, plus the one at stop.
      assert_operator stats["gc_events"], :>, 10, "GCs counted (GC.count)"
      assert_operator stats["gc_samples"], :<=, stats["samples"] + 1, "at most one GC record per pass"
    end
  end

  def test_gc_false_records_no_gc_frame
    out = File.join(@dir, "nogc.pprof")
    facts = run_workload("allocation_heavy", out, "false")
    assert_empty gc_samples(Sonde::Pprof.read(out))
    assert_equal 0, facts["stats"]["gc_events"]
    assert_equal false, facts["stats"]["gc"]
  end

  # 3.1/3.2 poll Ruby's GC clock, and only when a GC started or was under
  # way at the previous poll: the steps of a lazy sweep, which come after
  # the GC started and move the clock without moving GC.count, are counted
  # all the same, to the millisecond GC.stat(:time) counts in.
  def test_polled_gc_time_counts_the_lazy_sweep_after_a_pass
    skip "3.3+ time each GC step with a hook, not by GC.stat(:time)" if Sonde::Platform.backend == :public_api
    out = File.join(@dir, "lazy.pprof")
    stdout, stderr, status = run_ruby("-rsonde", "-rjson", "-e", <<~RUBY)
      # Enough live objects that sweeping them lazily takes many steps.
      kept = Array.new(1_500_000) { |i| [i] }
      GC.start
      before = GC.stat(:time)
      Sonde.start(rate: 100)
      sleep 0.05
      GC.start(full_mark: true, immediate_sweep: false)
      state = GC.latest_gc_info(:state)
      sleep 0.05 # passes read the GC clock: a GC started, and is sweeping
      # Allocating sweeps the rest step by step.
      200_000.times { |i| "x\#{i}" }
      after = GC.stat(:time)
      Sonde.stop.write(#{out.inspect})
      puts JSON.generate(state: state, ms: after - before, ms_with_stop: GC.stat(:time) - before, live: kept.size)
    RUBY
    assert_succeeded status, stderr
    facts = JSON.parse(stdout.lines.last)
    assert_equal "sweeping", facts["state"], "the GC sweeps lazily"
    profile = Sonde::Pprof.read(out)
    gc_ms = gc_samples(profile).sum { |s| s.values[profile.value_index("wall-time")] } / 1e6
    assert_includes facts["ms"]..facts["ms_with_stop"], gc_ms, "GC wall time recorded vs GC.stat(:time): #{facts}"
  end
end

# GC time belongs to the thread that ran the GC, even when the pass that
# records it runs on another thread (the idle helper, while the allocating
# thread naps): no "(unknown thread)", no thread id 0.
class GcThreadTest < Minitest::Test
  include SondeTestHelper

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the allocator ran (nearly) all the GC" 1.25-1.25x its bound
  # (>=).
  statistical def test_gc_of_a_thread_that_naps_between_allocations_is_its_own
    Dir.mktmpdir do |dir|
      out = File.join(dir, "naps.pprof")
      stdout, stderr, status = run_ruby("-rsonde", "-e", <<~RUBY)
        Sonde.start(rate: 100)
        allocator_tid = nil
        allocator = Thread.new do
          Thread.current.name = "allocator"
          allocator_tid = Thread.current.native_thread_id
          kept = []
          40.times do
            20_000.times { |i| kept << ("x" * 40) + i.to_s; kept.shift if kept.size > 30_000 }
            GC.start if rand < 0.3
            sleep 0.01 # nobody holds the GVL: the idle helper's passes record what GC did
          end
        end
        allocator.join
        Sonde.stop.write(#{out.inspect})
        puts [allocator_tid, Thread.main.native_thread_id].join(" ")
      RUBY
      assert_succeeded status, stderr
      allocator_tid, main_tid = stdout.split.map(&:to_i)
      profile = Sonde::Pprof.read(out)
      gc = profile.samples.select { |s| function_names(profile, s) == ["Garbage Collection"] }
      refute_empty gc
      # The thread is told by its id, which is what this test is about: under
      # YJIT on 3.1 one GC sample of the allocator sometimes carries "thread
      # <tid>" (its own tid) instead of its name (3 runs in 4 here, and in
      # CI's YJIT leg); why is not found yet.
      gc.each do |sample|
        assert_includes [allocator_tid, main_tid], sample.labels["thread id"], sample.labels.inspect
      end
      allocator_gc = gc.select { |s| s.labels["thread id"] == allocator_tid }
      assert_operator allocator_gc.size, :>=, gc.size * 0.8, "the allocator ran (nearly) all the GC"
    end
  end
end
