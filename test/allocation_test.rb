# frozen_string_literal: true

require_relative "support/test_helper"
require "sonde/report"
require "socket"

# Allocation and live-heap profiles against workloads that know what they
# allocated (test/workloads/known_allocations.rb): counts per method and
# class, a pattern a fixed interval would alias, survivors and their
# release, GC.compact, threads and labels. Each runs in its own process.
class AllocationTest < Minitest::Test
  include SondeTestHelper

  def setup
    @dir = Dir.mktmpdir("sonde-alloc")
  end

  def teardown
    FileUtils.remove_entry(@dir)
  end

  def profile_of(mode, interval = nil)
    out = File.join(@dir, "#{mode}.pprof")
    facts = run_workload("known_allocations", mode, out, *interval&.to_s)
    [facts, Sonde::Pprof.read(out), out]
  end

  def class_of(sample)
    sample.labels["allocation class"]
  end

  def alloc_total(profile, klass, method = nil)
    total(profile, "alloc-samples") do |s|
      class_of(s) == klass && (method.nil? || in_function?(profile, s, method))
    end
  end

  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "Foo from make_foos" -0.2% to -0.0% of ±10%; "Bar from
  # make_bars" -1.0% to +0.6% of ±10%; a bound 1.00-1.00x its bound (>=); a ratio -0.2% to -0.2% of
  # ±3%.
  statistical def test_estimated_counts_per_method_and_class_are_within_ten_percent
    facts, profile, out = profile_of("counts")
    assert_within facts["foo"], alloc_total(profile, "Foo", "Object#make_foos").to_f, 0.10, "Foo from make_foos"
    assert_within facts["bar"], alloc_total(profile, "Bar", "Object#make_bars").to_f, 0.10, "Bar from make_bars"
    assert_equal 0, alloc_total(profile, "Foo", "Object#make_bars"), "no Foo is allocated by make_bars"
    assert_equal 0, alloc_total(profile, "Bar", "Object#make_foos"), "no Bar is allocated by make_foos"
    # Each sample weighs the allocations since the previous one: the total
    # is the number of allocations the hook saw, to the object.
    stats = facts["stats"]
    assert_equal 0, stats["alloc_dropped_samples"]
    # (The stats were read before the stop, which records a few more.)
    assert_operator total(profile, "alloc-samples"), :>=, stats["allocations_sampled_over"],
                    "alloc-samples totals every allocation sampled over"
    assert_equal 1024, stats["alloc_interval"], "the default interval"
    assert_within facts["allocated"], stats["allocations_heard"].to_f, 0.03,
                  "listening all the time, the hook heard every allocation Ruby counted"
    assert_go_pprof_reads(out)
    assert_go_pprof_sample_index(out, "alloc-samples", "Object#make_foos")
  end

  # At continuous mode's alloc_duty Ruby's allocation hook is on for one tick in
  # 20: the samples of the listened ticks stand for all of them, so the
  # counts still come out, with the variance of one tick per block added.
  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a difference 0 to 0 of ±1e-09; "ticks passed (rate 100, 3 s)"
  # 1.50-2.84x its bound (>=); a bound 1.00-1.00x its bound (<=); "switching windows costs little (3
  # s run)" 0.00-0.01x its bound (<); "Foo from make_foos" -0.5% to +0.7% of ±10%; "Bar from
  # make_bars" -2.7% to +2.1% of ±10%; "Foo to Bar, 4 to 1" -2.6% to +3.5% of ±10%; "every
  # allocation, as Ruby counted them" -0.0% to -0.0% of ±3%.
  statistical def test_counts_are_estimated_when_only_some_ticks_are_listened_to
    facts, profile, = profile_of("windows", 64)
    stats = facts["stats"]
    block = (1 / Sonde::Options::CONTINUOUS_ALLOC_DUTY).round
    assert_in_delta 1.0 / block, stats["alloc_duty"], 1e-9
    assert_operator stats["alloc_ticks"], :>=, 100, "ticks passed (rate 100, 3 s)"
    # Full blocks listen once each; the unfinished last block may or may
    # not have reached its listened tick.
    assert_includes (stats["alloc_ticks"] / block)..(stats["alloc_ticks"].fdiv(block).ceil), stats["alloc_listened_ticks"],
                    "exactly one tick per block listened to (#{stats["alloc_ticks"]} ticks)"
    assert_operator stats["alloc_windows"], :<=, stats["alloc_listened_ticks"]
    heard_share = stats["allocations_heard"].fdiv(facts["allocated"])
    assert heard_share.positive? && heard_share < 3.0 / block, "the hook heard a duty's share of allocations: #{heard_share}"
    assert_operator stats["alloc_window_switch_seconds"], :>, 0, "switching windows is timed"
    assert_operator stats["alloc_window_switch_seconds"], :<, 0.03, "switching windows costs little (3 s run)"
    foo = alloc_total(profile, "Foo", "Object#make_foos").to_f
    bar = alloc_total(profile, "Bar", "Object#make_bars").to_f
    assert_within facts["foo"], foo, 0.10, "Foo from make_foos"
    assert_within facts["bar"], bar, 0.10, "Bar from make_bars"
    assert_within 4.0, foo / bar, 0.10, "Foo to Bar, 4 to 1"
    # The windows' samples are scaled to Ruby's own count of allocations.
    assert_within facts["allocated"], total(profile, "alloc-samples").to_f, 0.03, "every allocation, as Ruby counted them"
  end

  # The live heap when only some ticks are listened to: the survivors of
  # the listened ticks stand for those of the others, the dropped ones are
  # found dead.
  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "live Bar" -7.2% to +8.0% of ±15%; "the dropped Foo are not
  # live" 0.00-0.00x its bound (<); "Foo allocated" -1.1% to +0.8% of ±10%; "every allocation up to
  # the flush" -0.1% to -0.0% of ±3%.
  statistical def test_live_heap_is_estimated_when_only_some_ticks_are_listened_to
    # Interval 16: Bar is a tenth of the allocations, and some 13 windows
    # in 3 seconds hear them.
    facts, profile, = profile_of("heap_windows", 16)
    live = total(profile, "heap-live-samples") { |s| class_of(s) == "Bar" && in_function?(profile, s, "Object#make_survivors_of") }
    # Under 3.1's YJIT the passes that switch windows run only at rare safe
    # points, so windows fall less evenly (10 runs: 0.85-1.03 of the truth).
    assert_within facts["survivors"], live.to_f, yjit_on_ruby31? ? 0.25 : 0.15, "live Bar"
    dead = total(profile, "heap-live-samples") { |s| class_of(s) == "Foo" }
    assert_operator dead, :<, facts["garbage"] * 0.01, "the dropped Foo are not live"
    assert_within facts["garbage"], alloc_total(profile, "Foo", "Object#make_garbage").to_f, 0.10, "Foo allocated"
    # A flush ends the period its windows were pooling: the allocations up
    # to it are this profile's, none left for the next.
    assert_within facts["allocated_at_flush"], total(profile, "alloc-samples").to_f, 0.03, "every allocation up to the flush"
  end

  # Every 8th allocation is a Baz. A sampler taking every 8th allocation
  # would see only Baz or none; random gaps see each class in proportion.
  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "Baz, every 8th allocation" -3.5% to +3.4% of ±10%; "Qux, the
  # other seven" -0.5% to +0.5% of ±10%.
  statistical def test_a_pattern_in_step_with_the_interval_does_not_hide
    facts, profile, = profile_of("counts", 8)
    baz = alloc_total(profile, "Baz", "Object#make_pattern").to_f
    qux = alloc_total(profile, "Qux", "Object#make_pattern").to_f
    assert_within facts["baz"], baz, 0.10, "Baz, every 8th allocation"
    assert_within facts["qux"], qux, 0.10, "Qux, the other seven"
  end

  # 300,000 Strings made inside one C call (String#split) at interval 64:
  # some 4,700 samples before the next safe point, far more than the
  # buffer's 256 slots. Equal samples merge, so the count stays right.
  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "samples merged while the buffer was full" 13.22-13.43x its
  # bound (>); "Strings from make_split" -0.0% to +0.0% of ±5%; "next to nothing lost" 0.00-0.00x
  # its bound (<).
  statistical def test_a_burst_inside_one_c_call_is_counted_in_full
    facts, profile, = profile_of("burst", 64)
    stats = facts["stats"]
    assert_operator stats["alloc_merged_samples"], :>, 1_000, "samples merged while the buffer was full"
    assert_within facts["strings"], alloc_total(profile, "String", "Object#make_split").to_f, 0.05, "Strings from make_split"
    lost = total(profile, "alloc-samples") { |s| in_function?(profile, s, "(allocation samples lost)") }
    assert_operator lost, :<, facts["strings"] * 0.01, "next to nothing lost"
  end

  # How many samples an estimate rests on (alloc-samples-unscaled) counts
  # each sample once, those merged into an equal one while the buffer was
  # full included: exactly the samples the run recorded and merged, as its
  # stats count them after the stop. And the report says so.
  def test_the_samples_an_estimate_rests_on_are_counted_once_each
    facts, profile, out = profile_of("burst", 64)
    stats = facts.fetch("stats_after_stop")
    assert_operator stats["alloc_merged_samples"], :>, 0, "the burst filled the buffer (13,310 merged when measured)"
    assert_equal 0, stats["alloc_dropped_samples"]
    draws = stats["alloc_samples"] + stats["alloc_merged_samples"]
    assert_equal draws, total(profile, "alloc-samples-unscaled")
    stdout, stderr, status = run_sonde("report", out, "--sample", "alloc")
    assert_succeeded status, stderr
    assert_includes stdout, "\n  estimated from #{draws.to_s.reverse.scan(/\d{1,3}/).join(",").reverse} samples\n"
    assert_go_pprof_sample_index(out, "alloc-samples-unscaled", "Object#make_split")
  end

  # Sonde's own threads allocate too (an OTLP exporter decodes each profile
  # and encodes it again), and no pass meets them: their samples were
  # recorded as a "thread <tid>" of the application's (3.3: 1 to 4 samples
  # with Sonde's exporter frames in each 1-s period, by hand).
  def test_the_exporters_allocations_are_not_the_applications
    dir = File.join(@dir, "periods")
    Dir.mkdir(dir)
    closed_port = TCPServer.open("127.0.0.1", 0).then { |server| server.addr[1].tap { server.close } }
    _stdout, stderr, status = run_ruby("-rsocket", "-e", <<~RUBY)
      require "sonde"
      Sonde.start(continuous: true, every: 1, alloc: true, alloc_duty: 1, alloc_interval: 64,
                  export: "dir:#{dir},otlp:http://127.0.0.1:#{closed_port}")
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < 3.5
        1000.times { Object.new }
        sleep 0.01
      end
      otlp = Sonde.stats[:exporters].find { |e| e[:kind] == "otlp" }
      abort "the otlp exporter made no attempt: \#{otlp.inspect}" unless otlp && otlp[:failed] >= 2
      Sonde.stop
    RUBY
    assert_succeeded status, stderr
    profiles = Dir[File.join(dir, "*.pprof")].map { |file| Sonde::Pprof.read(file) }
    assert_operator profiles.size, :>=, 3
    profiles.each do |profile|
      allocated = profile.samples.select { |s| s.values[profile.value_index("alloc-samples")].positive? }
      refute_empty allocated, "the application's own allocations"
      # (The main thread's calls of Sonde's API are the application's.)
      exporter = allocated.select { |s| profile.frames(s).any? { |f, _| f.name == "Sonde::Exporters::Base#run_without_raising" } }
      assert_empty exporter.map { |s| s.labels["thread name"] }, "allocation samples of an exporter's thread"
      assert_empty allocated.map { |s| s.labels["thread name"] }.grep(/\Athread \d+\z/), "unnamed allocating threads"
    end
  end

  # The VM's own objects (imemos) keep data in their class word: sampled
  # at every allocation across many GCs, none may be taken for a class
  # (the GC mark phase would crash on it). Nor may their samples merge
  # with the time samples of the same stack: with no class of their own
  # they were keyed like a time sample, and 52-114 CPU or wall samples of
  # each such run read as allocations of "(VM internal)".
  def test_the_vm_internal_objects_are_sampled_without_a_class
    _facts, profile, = profile_of("internals", 1)
    internal = total(profile, "alloc-samples") { |s| class_of(s) == "(VM internal)" }
    assert_operator internal, :>, 10_000, "imemos allocated by blocks and ifuncs"
    assert_operator total(profile, "alloc-samples") { |s| class_of(s) == "Array" }, :>, 100_000
    time_types = %w[cpu-time cpu-samples wall-time wall-samples].map { |type| profile.value_index(type) }
    classed_time = profile.samples.count { |s| class_of(s) && time_types.any? { |i| s.values[i] != 0 } }
    assert_equal 0, classed_time, "time samples that carry an allocation class"
    assert_operator total(profile, "cpu-samples"), :>, 0, "CPU samples, to merge with if keyed alike"
  end

  def test_allocation_samples_take_no_cpu_or_wall_time_and_cpu_samples_no_allocations
    _facts, profile, = profile_of("counts")
    alloc = profile.value_index("alloc-samples")
    time_types = %w[cpu-time cpu-samples wall-time wall-samples].map { |type| profile.value_index(type) }
    profile.samples.each do |sample|
      if sample.values[alloc].positive?
        assert time_types.all? { |i| sample.values[i].zero? }, "an allocation sample carries no time"
        refute_nil class_of(sample)
      else
        assert_nil class_of(sample), "a time sample has no allocation class"
      end
    end
    assert_operator total(profile, "cpu-samples"), :>, 0, "CPU sampling goes on"
    assert_nil profile.value_index("heap-live-samples"), "no heap types without heap: true"
  end

  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "live Foo allocated by make_survivors" -0.7% to -0.2% of
  # ±15%; "the dropped objects are not live" 0.00-0.00x its bound (<); "Foo allocations" -0.5% to
  # -0.0% of ±10%; a bound 0.00-0.00x its bound (<); "the flush checked the tracked set" 1.00-1.00x
  # its bound (>=); "the garbage's samples left the tracked set" 1.42-1.52x its bound (>); "what is
  # left" 0.49-0.71x its bound (<).
  statistical def test_live_heap_counts_the_survivors_and_forgets_them_once_freed
    facts, profile, out = profile_of("heap")
    live = total(profile, "heap-live-samples") { |s| class_of(s) == "Foo" && in_function?(profile, s, "Object#make_survivors") }
    assert_within facts["survivors"], live.to_f, 0.15, "live Foo allocated by make_survivors"
    garbage = total(profile, "heap-live-samples") { |s| in_function?(profile, s, "Object#make_garbage") }
    assert_operator garbage, :<, facts["survivors"] * 0.02, "the dropped objects are not live"
    # heap-live-size is each survivor's memsize_of, times its weight.
    size = total(profile, "heap-live-size") { |s| class_of(s) == "Foo" && in_function?(profile, s, "Object#make_survivors") }
    assert_equal live * facts["foo_memsize"], size
    # Allocations are there too: heap: true samples them.
    assert_within 1_000_000, alloc_total(profile, "Foo").to_f, 0.10, "Foo allocations"
    assert_go_pprof_sample_index(out, "heap-live-size", "Object#make_survivors")

    after = Sonde::Pprof.read("#{out}.after")
    left = total(after, "heap-live-samples") { |s| class_of(s) == "Foo" }
    assert_operator left, :<, facts["survivors"] * 0.01, "after the survivors are dropped and GC runs, they are gone"
    # Without a FREEOBJ hook the dead leave the tracked set at the checks:
    # the flush found the garbage's samples dead (900,000 / 1024 or so).
    stats = facts["stats"]
    assert_operator stats["heap_checks"], :>=, 1, "the flush checked the tracked set"
    assert_operator stats["heap_freed_objects"], :>, 600, "the garbage's samples left the tracked set"
    assert_operator stats["heap_tracked_objects"], :<, 150, "what is left: the survivors' samples"
  end

  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "GC.compact moved the tracked objects" 1.00-1.00x its bound
  # (>=); "survivors tracked after GC.compact" -4.6% to +2.2% of ±15%.
  statistical def test_gc_compact_resets_the_tracked_set_and_tracking_goes_on
    facts, profile, = profile_of("compaction")
    stats = facts["stats"]
    assert_operator stats["heap_compaction_resets"], :>=, 1, "GC.compact moved the tracked objects: the set was reset"
    live = total(profile, "heap-live-samples") { |s| class_of(s) == "Foo" }
    # Only what was allocated after the compaction is tracked (50,000).
    assert_within facts["survivors_after_compaction"], live.to_f, 0.15, "survivors tracked after GC.compact"
  end

  # A one-off profile listens at every tick by default: a 0.2 s block at
  # continuous mode's duty (one tick in 20) got no listened tick and
  # reported about 0 of its 1,000,000 Foo. Listening throughout, each
  # sample weighs the allocations since the previous one, so the block's
  # Foo add up to its count but for the gap after the last sample (5 runs:
  # 0.03% to 0.18% short; the bound is 1%).
  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "Foo from make_foos" -0.1% to -0.0% of ±1%.
  statistical def test_a_one_off_profile_listens_to_every_tick_by_default
    out = File.join(@dir, "one_off.pprof")
    facts = run_workload("alloc_duty", "one_off", out)
    assert_equal 1.0, facts["alloc_duty"]
    profile = Sonde::Pprof.read(out)
    assert_within 1_000_000, alloc_total(profile, "Foo", "Object#make_foos").to_f, 0.01, "Foo from make_foos"
    assert_empty Sonde::Report.notes(profile), "it listened: no note"
  end

  # At a duty below 1 a profile may span no listened tick: it says so in
  # its comments, and `sonde report` shows it, whether it holds no
  # allocation sample (the first periods) or an earlier period's mix. One
  # tick in 100, 40 periods of about 5 ticks: the full blocks guarantee
  # periods of both kinds.
  def test_a_profile_that_listened_to_no_tick_says_so
    out = File.join(@dir, "flush.pprof")
    periods = run_workload("alloc_duty", "flushes", out).fetch("periods")
    unheard = periods.each_index.select { |n| periods[n]["listened"].zero? }
    refute_empty unheard
    assert_operator unheard.size, :<, periods.size, "full blocks of 100 ticks listen once each: #{periods}"
    periods.each_index do |n|
      profile = Sonde::Pprof.read("#{out}.#{n}")
      notes = Sonde::Report.notes(profile).grep(/\Aallocations: no tick of this profile was listened to/)
      if unheard.include?(n)
        assert_equal 1, notes.size, "period #{n} (#{periods[n]}) says its estimate rests on no listened tick"
        assert_includes notes.first, "alloc_duty 0.01 listens to one tick in 100"
        assert_includes notes.first, "this profile spans #{periods[n]["ticks"]} tick"
        has_samples = total(profile, "alloc-samples").positive?
        assert_includes notes.first, has_samples ? "an earlier profile's mix" : "its allocation counts are unknown, not zero"
      else
        assert_empty notes, "period #{n} listened"
      end
    end
    stdout, stderr, status = run_sonde("report", "#{out}.#{unheard.first}")
    assert_succeeded status, stderr
    assert_match(/^Note: allocations: no tick of this profile was listened to/, stdout)
    # A period whose samples are all an earlier one's (its own come from
    # a tick that straddled the flush, when there are any) says so.
    lent = unheard.find do |n|
      profile = Sonde::Pprof.read("#{out}.#{n}")
      total(profile, "alloc-samples").positive? && total(profile, "alloc-samples-unscaled").zero?
    end
    if lent
      stdout, stderr, status = run_sonde("report", "#{out}.#{lent}", "--sample", "alloc")
      assert_succeeded status, stderr
      assert_includes stdout, "\n  estimated from no sample of its own: an earlier profile's samples lent it their mix ("
    end
  end

  # Statistical. Its bounds against what 6 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "Foo allocated on the allocator thread" -0.3% to +0.0% of
  # ±10%; "Foo allocated inside with_labels" -0.2% to +0.3% of ±10%.
  statistical def test_samples_carry_their_thread_and_labels
    # Interval 128: at 1024, 100,000 allocations make some 100 samples, and
    # the estimate's own spread (its standard deviation) would be 10%.
    _facts, profile, = profile_of("threads", 128)
    allocator = total(profile, "alloc-samples") { |s| thread_name(s) == "allocator" && class_of(s) == "Foo" }
    labelled = total(profile, "alloc-samples") { |s| s.labels["phase"] == "labelled" && class_of(s) == "Foo" }
    assert_within 200_000, allocator.to_f, 0.10, "Foo allocated on the allocator thread"
    assert_within 100_000, labelled.to_f, 0.10, "Foo allocated inside with_labels"
  end

  def assert_go_pprof_sample_index(path, index, function)
    return unless go_available?

    stdout, stderr, status = Open3.capture3("go", "tool", "pprof", "-top", "-nodefraction=0", "-sample_index=#{index}", path)
    assert status.success?, "go tool pprof -sample_index=#{index} failed:\n#{stderr}"
    assert_match(/Type: #{index}/, stdout)
    assert_includes stdout, function
  end
end
