# frozen_string_literal: true

require "minitest/autorun"
require "sonde/pprof"
require "sonde/pprof/merge"
require "support/pprof_fixture"

# Pprof::Merge: profiles merged as `go tool pprof` merges them. Hand-made
# inputs, so every total is exact.
class PprofMergeTest < Minitest::Test
  MS = 1_000_000

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
  end

  # Two workers: the same stack under the same labels in both, a stack only
  # the second has, and the same stack under another thread.
  def worker(cpu:, wall:, extra: nil, time: 0, duration: 10 * MS, period: 10 * MS, comment: nil)
    f = PprofFixture::Builder.new
    f.sample_type("cpu-time", "nanoseconds")
    f.sample_type("wall-time", "nanoseconds")
    f.field("time_nanos: #{time}")
    f.field("duration_nanos: #{duration}")
    f.field("period: #{period}")
    f.field("comment: #{f.string(comment)}") if comment
    # Function ids differ between the inputs: the second adds "spare" first.
    f.function("spare", "spare.rb", start_line: 1) if extra
    work = f.frame("work", "app.rb", line: 12, start_line: 10)
    main = f.frame("main", "app.rb", line: 3, start_line: 1)
    t1 = { "thread id" => 1, "thread name" => "main" }
    f.sample([work, main], [cpu, wall], t1)
    f.sample([f.frame("work", "app.rb", line: 12, start_line: 10), main], [cpu, wall], t1.merge("thread id" => 2))
    f.sample([f.frame("other", "app.rb", line: 30, start_line: 30), main], [extra, extra], t1) if extra
    Sonde::Pprof.decode(f.gzip)
  end

  def totals(profile)
    profile.samples.map(&:values).transpose.map(&:sum)
  end

  def test_totals_are_the_sums_of_the_inputs_totals
    a = worker(cpu: 30 * MS, wall: 40 * MS)
    b = worker(cpu: 7 * MS, wall: 9 * MS, extra: 5 * MS)
    merged = Sonde::Pprof::Merge.call([a, b])
    assert_equal totals(a).zip(totals(b)).map(&:sum), totals(merged)
    assert_equal [(2 * 30 + 2 * 7 + 5) * MS, (2 * 40 + 2 * 9 + 5) * MS], totals(merged)
  end

  # A period of a worker: allocations (a flow) and its live heap at the
  # period's end (a snapshot), with the pid and host comments continuous
  # mode writes (none: a one-off profile).
  def period(time:, alloc:, live:, pid: nil, host: "web1")
    f = PprofFixture::Builder.new
    [%w[alloc-samples count], %w[heap-live-samples count], %w[heap-live-size bytes]].each { |t, u| f.sample_type(t, u) }
    f.field("time_nanos: #{time}")
    f.field("duration_nanos: #{10 * MS}")
    ["host=#{host}", "pid=#{pid}"].each { |c| f.field("comment: #{f.string(c)}") } if pid
    make = f.frame("make", "app.rb", line: 5, start_line: 4)
    f.sample([make], [alloc, live, live * 40], "thread id" => 1, "allocation class" => "Foo")
    Sonde::Pprof.decode(f.gzip)
  end

  # Ten periods of one worker are its allocations over all ten, but its
  # live heap once: the latest period's, whatever order the files come in.
  # Each process counts its own latest; a profile without a pid (one-off)
  # counts as a process of its own.
  def test_the_live_heap_is_each_processes_latest_not_a_sum_of_periods
    periods = (1..10).map { |n| period(time: n * 10 * MS, alloc: 100, live: 1000 + n, pid: 7) }
    merged = Sonde::Pprof::Merge.call(periods.rotate(4))
    assert_equal [1000, 1010, 1010 * 40], totals(merged), "ten periods' allocations, the tenth's live heap"
    other = period(time: 5 * MS, alloc: 1, live: 500, pid: 8)
    same_pid_other_host = period(time: 5 * MS, alloc: 1, live: 300, pid: 7, host: "web2")
    merged = Sonde::Pprof::Merge.call(periods + [other, same_pid_other_host])
    assert_equal [1002, 1010 + 500 + 300, (1010 + 500 + 300) * 40], totals(merged)
    one_offs = [period(time: 0, alloc: 1, live: 20), period(time: MS, alloc: 2, live: 30)]
    assert_equal [3, 50, 50 * 40], totals(Sonde::Pprof::Merge.call(one_offs)), "no pid: each its own process"
    assert_equal 1, Sonde::Pprof::Merge.call(periods).samples.size, "one stack, one sample"
  end

  def test_equal_stacks_and_labels_become_one_sample
    merged = Sonde::Pprof::Merge.call([worker(cpu: 30 * MS, wall: 40 * MS), worker(cpu: 7 * MS, wall: 9 * MS, extra: 5 * MS)])
    stacks = merged.samples.map { |s| [merged.frames(s).map { |f, line| "#{f.name}:#{line}" }, s.labels["thread id"], s.values] }
    assert_equal 3, stacks.size
    assert_includes stacks, [["work:12", "main:3"], 1, [37 * MS, 49 * MS]]
    assert_includes stacks, [["work:12", "main:3"], 2, [37 * MS, 49 * MS]]
    assert_includes stacks, [["other:30", "main:3"], 1, [5 * MS, 5 * MS]]
  end

  def test_one_function_and_location_per_distinct_fields
    merged = Sonde::Pprof::Merge.call([worker(cpu: 1, wall: 1), worker(cpu: 1, wall: 1, extra: 1)])
    assert_equal %w[main other work], merged.functions.values.map(&:name).sort
    keys = merged.locations.values.map { |l| [l.function_id, l.line] }
    assert_equal keys.uniq, keys
  end

  def test_header_as_go_tool_pprof_merges_it
    a = worker(cpu: 1, wall: 1, time: 2_000, duration: 10 * MS, period: 10 * MS, comment: "service=web")
    b = worker(cpu: 1, wall: 1, time: 1_000, duration: 15 * MS, period: 20 * MS, comment: "service=web")
    merged = Sonde::Pprof::Merge.call([a, b])
    assert_equal 1_000, merged.time_nanos
    assert_equal 25 * MS, merged.duration_nanos
    assert_equal 20 * MS, merged.period
    assert_equal ["service=web"], merged.comments
    assert_equal a.sample_types, merged.sample_types
  end

  def test_different_sample_types_are_refused_in_one_line
    f = PprofFixture::Builder.new
    f.sample_type("alloc-samples", "count")
    f.sample([f.frame("main", "app.rb", line: 1)], [3])
    error = assert_raises(Sonde::Pprof::Merge::IncompatibleError) do
      Sonde::Pprof::Merge.call([worker(cpu: 1, wall: 1), Sonde::Pprof.decode(f.gzip)], names: %w[a.pprof b.pprof])
    end
    assert_equal "b.pprof: its sample types (alloc-samples/count) differ from a.pprof's " \
                 "(cpu-time/nanoseconds, wall-time/nanoseconds); only profiles of the same sample types merge",
                 error.message
  end

  def test_one_profile_is_itself
    a = worker(cpu: 1, wall: 1)
    assert_same a, Sonde::Pprof::Merge.call([a])
  end
end
