# frozen_string_literal: true

require_relative "support/test_helper"
require "sonde/flamegraph"
require "sonde/pprof/merge"
require "support/page_data"
require "support/pprof_fixture"
require "support/derived_fixture"
require "support/timeline_fixture"

# The flame graph page's timeline data (lib/sonde/flamegraph/timeline.rb):
# each timed sample, in its thread's lane, at its moment, pointing at the
# page sample that holds its stack, state and labels. Checked against
# profiles built by hand and against a workload that knows when its threads
# ran (test/workloads/taking_turns.rb).
class FlamegraphTimelineTest < Minitest::Test
  include SondeTestHelper

  MS = 1_000_000
  EDGE_US = 20_000 # the timeline's bound: within 20 ms of a turn's edges
  BURNERS = { "A" => "Object#burn_in_a", "B" => "Object#burn_in_b" }.freeze

  def page_data(profile)
    PageData.parse(Sonde::Flamegraph.html(profile, title: "x"))
  end

  def test_each_timed_sample_is_a_moment_of_its_threads_lane
    skip "protoc is not installed" unless PprofFixture.protoc?
    f = PprofFixture::Builder.new
    %w[cpu-time wall-time].each { |type| f.sample_type(type, "nanoseconds") }
    f.field("time_nanos: #{1000 * MS}")
    f.field("duration_nanos: #{2000 * MS}")
    serve = f.frame("serve", "app.rb", line: 1)
    query = f.frame("query", "db.rb", line: 9)
    web = { "thread id" => 7, "thread name" => "puma 1" }
    job = { "thread id" => 3, "thread name" => "sidekiq" }
    # Out of order on purpose: lanes in the threads' order, moments by end.
    f.sample([query, serve], [0, 30 * MS], web.merge("state" => "blocked", "endpoint" => "GET /users",
                                                     "end_timestamp_ns" => 1200 * MS))
    f.sample([serve], [10 * MS, 0], web.merge("state" => "running", "endpoint" => "GET /users",
                                              "end_timestamp_ns" => 1170 * MS))
    f.sample([serve], [0, 20 * MS], job.merge("state" => "running", "job" => "Mailer", "end_timestamp_ns" => 1100 * MS))
    f.sample([serve], [0, 50 * MS], web.merge("state" => "running")) # untimed: in the flame graph only
    data = page_data(Sonde::Pprof.decode(f.encode))

    timeline = data["timeline"]
    assert_equal (1000 * MS).to_s, timeline["originNs"]
    assert_equal 2_000_000, timeline["endUs"], "the profile's end"
    assert_equal [["puma 1", 7], ["sidekiq", 3]], timeline["lanes"].map { |thread, _| data["threads"][thread] }
    moments = PageData.moments(data).map { |m| [m.thread, m.end_us, m.state, m.stack, m.labels, m.values] }
    assert_equal [["puma 1", 170_000, "running", %w[serve], { "endpoint" => "GET /users" }, [10 * MS, 0]],
                  ["puma 1", 200_000, "blocked", %w[query serve], { "endpoint" => "GET /users" }, [0, 30 * MS]],
                  ["sidekiq", 100_000, "running", %w[serve], { "job" => "Mailer" }, [0, 20 * MS]]], moments
    # The flame graph's samples still sum every sample, timed or not.
    width = 4 + data["types"].size
    assert_equal [10 * MS, 100 * MS], data["samples"].each_slice(width).map { |row| row.drop(4) }.transpose.map(&:sum)
  end

  def test_a_profile_without_moments_has_no_timeline
    skip "protoc is not installed" unless PprofFixture.protoc?
    data = page_data(DerivedFixture.profile)
    assert_nil data["timeline"]
    refute_empty data["samples"], "the flame graph is as before"
  end

  # Merged files, or a profile from elsewhere, may start after a moment (or
  # say no start): time 0 is then the earliest moment's start.
  def test_time_starts_at_the_earliest_moment_when_the_profile_starts_later
    skip "protoc is not installed" unless PprofFixture.protoc?
    f = PprofFixture::Builder.new
    f.sample_type("wall-time", "nanoseconds")
    f.field("time_nanos: #{1000 * MS}")
    f.sample([f.frame("a", "a.rb", line: 1)], [40 * MS], "thread id" => 1, "state" => "sleeping",
                                                         "end_timestamp_ns" => 1010 * MS)
    data = page_data(Sonde::Pprof.decode(f.encode))
    assert_equal (970 * MS).to_s, data["timeline"]["originNs"]
    assert_equal [[0, [0, 40_000, 40 * MS]]], data["timeline"]["lanes"]
  end

  # A fleet's workers, merged (sonde flamegraph w1.pprof w2.pprof): they
  # ran side by side, so the axis ends at the latest end, not at the sum
  # of their durations (4 s here before); and each worker's "main" lane
  # says its thread id.
  def test_merged_workers_share_one_axis_and_their_lanes_are_told_apart
    skip "protoc is not installed" unless PprofFixture.protoc?
    workers = [[11, 1000], [12, 1100]].map do |tid, start_ms|
      f = PprofFixture::Builder.new
      f.sample_type("wall-time", "nanoseconds")
      f.field("time_nanos: #{start_ms * MS}")
      f.field("duration_nanos: #{2000 * MS}")
      serve = f.frame("serve", "app.rb", line: 1)
      f.sample([serve], [10 * MS], "thread id" => tid, "thread name" => "main", "state" => "running",
                                   "end_timestamp_ns" => (start_ms + 500) * MS)
      f.sample([serve], [10 * MS], "thread id" => tid + 100, "thread name" => "reactor #{tid}",
                                   "state" => "blocked", "end_timestamp_ns" => (start_ms + 600) * MS)
      Sonde::Pprof.decode(f.encode)
    end
    merged = Sonde::Pprof::Merge.call(workers)
    assert_equal 4000 * MS, merged.duration_nanos, "the duration is the sum, as go tool pprof has it"
    timeline = page_data(merged)["timeline"]
    assert_equal (1000 * MS).to_s, timeline["originNs"]
    assert_equal 2_100_000, timeline["endUs"], "the later worker's end"
    assert_equal ["main (11)", "reactor 11", "main (12)", "reactor 12"], timeline["names"]
  end

  def test_ten_thousand_moments_per_thread_all_land
    data = page_data(TimelineFixture.profile(threads: 3, samples_per_thread: 10_000))
    lanes = data["timeline"]["lanes"]
    assert_equal %w[worker-0 worker-1 worker-2], lanes.map { |thread, _| data["threads"][thread][0] }
    lanes.each { |_thread, flat| assert_equal 10_000, flat.size / (2 + data["types"].size) }
    ends = PageData.moments(data).group_by(&:thread).transform_values { |moments| moments.map(&:end_us) }
    ends.each_value { |times| assert_equal times.sort, times, "each lane's moments by end" }
  end

  # What the page will draw of two threads taking turns: each burner's CPU
  # samples in its own thread's lane, within its turns.
  def test_taking_turns_burners_land_in_their_turns
    skip "Sonde cannot run here: #{Sonde.unsupported_reason}" unless Sonde.supported?
    profile, facts, = taking_turns_recording
    data = page_data(profile)
    assert_equal facts["timeline_samples"], PageData.moments(data).size, "every timed sample is a moment"
    cpu = data["types"].index { |type, _| type == "cpu-time" }
    contended = PageData.us_of(data, facts["contended"][0])
    BURNERS.each do |thread, burner|
      turns = facts["turns"].select { |name, _, _| name == thread }
                            .map { |_, from, to| (PageData.us_of(data, from) - EDGE_US)..(PageData.us_of(data, to) + EDGE_US) }
      burning = PageData.moments(data).select do |m|
        m.thread == thread && m.state == "running" && m.stack.include?(burner) && m.values[cpu].positive? &&
          m.end_us < contended
      end
      # How many there are follows the CPU the thread got (the statistical
      # count is test/timeline_test.rb's); here only where they land.
      refute_empty burning, "#{thread}'s CPU samples of #{burner}"
      outside = burning.reject { |m| turns.any? { |turn| turn.cover?(m.end_us) } }
      assert_empty outside.map(&:end_us), "#{thread}'s #{burner} samples outside its turns #{turns}"
      other = BURNERS.fetch(thread == "A" ? "B" : "A")
      assert(PageData.moments(data).none? { |m| m.thread == thread && m.stack.include?(other) },
             "#{other} in #{thread}'s lane")
    end
  end
end
