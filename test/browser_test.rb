# frozen_string_literal: true

require_relative "support/test_helper"
require "fileutils"
require "sonde/flamegraph"
require "support/derived_fixture"
require "support/allocation_fixture"
require "support/timeline_fixture"
require "support/page_data"
require "support/node_deps"

# The flame graph page in headless Chromium (Debian's `chromium`, driven by
# puppeteer-core): it renders the expected frames, zooms on a click,
# switches to wall time, to allocations and to the live heap, searches,
# shows a tooltip, and opens fast on a big profile; its timeline draws
# each thread's states when they were, and a range dragged across it folds
# the flame graph to that range. Screenshots go to test/artifacts/ (the
# timeline's to tmp/).
class BrowserTest < Minitest::Test
  include SondeTestHelper

  ARTIFACTS = File.join(SondeTestHelper::ROOT, "test", "artifacts")
  SCREENSHOTS = File.join(SondeTestHelper::ROOT, "tmp")
  # The issue's bar: open and first paint of a 60 s, 8-thread profile under 1 s.
  FIRST_PAINT_BUDGET_MS = 1000
  # The page is opened this many times and its median first paint is held
  # to the bar: one open on a busy machine is one draw of its noise.
  FIRST_PAINT_OPENS = 3
  # Where the timeline is probed in a turn: this far inside its edges (the
  # timeline's own bound is 20 ms), at PROBES evenly spaced moments.
  PROBE_MARGIN_US = 40_000
  PROBES = 5
  # A timeline of 4 threads x 10,000 samples: its own drawing, the page's
  # first paint (mostly the flame graph's SVG) and a range's refold.
  TIMELINE_BUDGET_MS = 500
  TIMELINE_FIRST_PAINT_BUDGET_MS = 4000
  TIMELINE_REFOLD_BUDGET_MS = 1500

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
    @browser = NodeDeps.browser_or_skip(self)
    @dir = Dir.mktmpdir("sonde-browser")
    FileUtils.mkdir_p(ARTIFACTS)
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def write_page(profile, name)
    path = File.join(@dir, "#{name}.html")
    File.write(path, Sonde::Flamegraph.html(profile, title: name))
    path
  end

  def frame(frames, name)
    found = frames.find { |f| f["name"] == name }
    assert found, "no frame #{name} in #{frames.map { |f| f["name"] }}"
    found
  end

  def test_renders_zooms_switches_to_wall_time_and_searches
    html = write_page(DerivedFixture.profile, "app.pprof")
    result = @browser.flamegraph(html, click: "work", type: "wall-time", search: "sleep", hover: "Kernel#sleep",
                                       screenshot: File.join(ARTIFACTS, "flamegraph.png"))
    assert_empty result["errors"]

    # CPU time: main (40 ms) and recurse (50 ms) under the root "main" frame;
    # Kernel#sleep used no CPU, so it is not drawn.
    before = result["before"]
    all = frame(before, "all")["width"]
    assert_in_delta all, frame(before, "main")["width"], 0.5, "main is the top frame, as wide as the graph"
    assert_in_delta all * 50 / 90.0, frame(before, "recurse")["width"], 1
    assert_in_delta all * 40 / 90.0, frame(before, "work")["width"], 1
    assert_nil before.find { |f| f["name"] == "Kernel#sleep" }

    # A click on work zooms: it takes the full width; its ancestors fade.
    after_click = result["afterClick"]
    assert_in_delta all, frame(after_click, "work")["width"], 0.5
    assert frame(after_click, "main")["fade"]
    assert_nil after_click.find { |f| f["name"] == "recurse" }

    # Wall time: the sleep (200 of 360 ms) appears; the table follows.
    after_type = result["afterType"]
    assert_in_delta all * 200 / 360.0, frame(after_type, "Kernel#sleep")["width"], 1
    assert_equal ["200 ms", "55.6%", "200 ms", "55.6%", "Kernel#sleep"], result["topRows"].first

    assert_equal ["Kernel#sleep"], result["highlighted"]
    assert_match(/search "sleep": 200 ms of 360 ms \(55\.6%\)/, result["details"])
    assert_match(/Kernel#sleep.*total 200 ms \(55\.6%\).*self 200 ms \(55\.6%\)/, result["tooltip"])
    assert_match(/\AThis profile has no timeline: it was recorded with --no-timeline, timeline: false or in continuous mode/,
                 result["timelineNote"])
  end

  # Allocations read as object counts, the live heap as bytes: in the
  # table, the tooltip, the search total and each thread's share.
  def test_allocation_and_heap_views
    html = write_page(AllocationFixture.profile, "alloc.pprof")
    alloc = @browser.flamegraph(html, type: "alloc-samples", search: "make_", hover: "make_foos")
    assert_empty alloc["errors"]
    assert_equal ["CPU time (cpu-time)", "cpu-samples", "Wall time (wall-time)", "Allocations (alloc-samples)",
                  "heap-live-samples", "Live heap (heap-live-size)"], alloc["typeOptions"]
    all = frame(alloc["afterType"], "all")["width"]
    assert_in_delta all * 0.8, frame(alloc["afterType"], "make_foos")["width"], 1
    assert_in_delta all * 0.3, frame(alloc["afterType"], "format_name")["width"], 1
    assert_equal ["1,000,000", "50.0%", "1,600,000", "80.0%"], alloc["topRows"].first.first(4)
    assert_match(/\Amake_foos/, alloc["topRows"].first.last)
    assert_equal ["main (1) 1,600,000", "worker (2) 400,000"], alloc["threadAmounts"]
    assert_match(/search "make_": 2,000,000 of 2,000,000 \(100\.0%\)/, alloc["details"])
    assert_match(/make_foos.*total 1,600,000 \(80\.0%\).*self 1,000,000 \(50\.0%\)/, alloc["tooltip"])

    heap = @browser.flamegraph(html, type: "heap-live-size", hover: "make_bars",
                                     screenshot: File.join(ARTIFACTS, "flamegraph-heap.png"))
    assert_empty heap["errors"]
    assert_in_delta all * 0.75, frame(heap["afterType"], "make_foos")["width"], 1
    assert_nil heap["afterType"].find { |f| f["name"] == "format_name" }, "its objects are all freed"
    assert_equal ["48.0 MB", "75.0%", "48.0 MB", "75.0%"], heap["topRows"].first.first(4)
    assert_equal ["main (1) 48.0 MB", "worker (2) 16.0 MB"], heap["threadAmounts"]
    assert_match(/make_bars.*total 16\.0 MB \(25\.0%\).*self 16\.0 MB \(25\.0%\)/, heap["tooltip"])
  end

  # The page's profile is deflated; a browser that cannot inflate it says so.
  def test_a_browser_without_decompression_streams_is_told_why
    html = write_page(DerivedFixture.profile, "old-browser")
    result = @browser.without_decompression(html)
    assert_match(/needs a browser with DecompressionStream \(Chrome 80, Firefox 113, Safari 16\.4/, result["message"])
    assert_equal 0, result["frames"]
  end

  def test_thread_and_state_filters
    html = write_page(DerivedFixture.profile, "filters")
    result = @browser.flamegraph(html, type: "wall-time", uncheck: ["#states input[value=\"1\"]", "#threads input[value=\"1\"]"])
    assert_empty result["errors"]
    names = result["afterFilter"].map { |f| f["name"] }
    assert_includes names, "work"
    refute_includes names, "Kernel#sleep", "sleeping is hidden"
    refute_includes names, "recurse", "the worker thread is hidden"
  end

  def test_label_filters
    f = PprofFixture::Builder.new
    f.sample_type("cpu-time", "nanoseconds")
    serve = f.frame("serve", "app.rb", line: 1)
    f.sample([f.frame("list_users", "app.rb", line: 5), serve], [30], "thread id" => 1, "endpoint" => "GET /users")
    f.sample([f.frame("create_order", "app.rb", line: 9), serve], [10], "thread id" => 1, "endpoint" => "POST /orders")
    f.sample([f.frame("boot", "app.rb", line: 20)], [5], "thread id" => 1)
    html = write_page(Sonde::Pprof.decode(f.encode), "labels")
    # Value 0 of the first label name (endpoint) is "GET /users"; value 2 is "(no endpoint)".
    result = @browser.flamegraph(html, uncheck: ["#label-0 input[value=\"0\"]", "#label-0 input[value=\"2\"]"])
    assert_empty result["errors"]
    before = result["before"].map { |frame| frame["name"] }
    assert_equal %w[boot create_order list_users], (before & %w[boot create_order list_users]).sort
    names = result["afterFilter"].map { |frame| frame["name"] }
    assert_includes names, "create_order"
    refute_includes names, "list_users", "GET /users is unchecked"
    refute_includes names, "boot", "samples without an endpoint are unchecked"
  end

  # Statistical: first paint against the 1 s bar, in a browser already running (a small page
  # first), the median of 3 opens. Measured 5 Dec 2026 (3.1, VERBOSE=1), one open each:
  # 576-675 ms on a quiet machine (4 runs), 718-1000 ms beside two busy nice-10 processes
  # (6 runs), 1357 ms once inside `rake test`; medians of 3 beside the two busy processes:
  # 552-818 ms (4 runs), 0.55-0.82x the bound. The frame counts are not noisy.
  statistical def test_big_profile_opens_and_paints_within_a_second
    html = write_page(DerivedFixture.big_profile, "big")
    small = write_page(DerivedFixture.profile, "small")
    result = @browser.flamegraph(html, warmUp: small, opens: FIRST_PAINT_OPENS, click: "Module3::Class3#method_3",
                                       screenshot: File.join(ARTIFACTS, "flamegraph-big.png"))
    assert_empty result["errors"]
    assert_operator result["before"].size, :>, 100
    # Frames too narrow to draw were left out; zooming in brings them back.
    zoomed = result["afterClick"].reject { |f| f["fade"] }
    assert_operator zoomed.size, :>, 100, "frames under the zoomed one"
    warn "\nflame graph page of a 60 s, 8-thread profile (#{File.size(html) / 1024} KiB): first paint at " \
         "#{result["firstPaintMs"].round} ms (#{result["firstPaints"].map(&:round).join(", ")}), " \
         "page ready in #{result["openedMs"]} ms #{result["marks"].inspect}" if ENV["VERBOSE"]
    assert_operator result["firstPaintMs"], :<, FIRST_PAINT_BUDGET_MS,
                    "first paint at #{result["firstPaintMs"].round} ms, the median of " \
                    "#{result["firstPaints"].map(&:round).join(", ")} (budget #{FIRST_PAINT_BUDGET_MS} ms)"
  end

  # Two threads taking turns (test/workloads/taking_turns.rb knows when):
  # a lane each, named; the canvas has the running colour in A's lane
  # during A's turns and not during B's, and the other way round; a drag
  # across one of A's turns folds the flame graph to the samples whose
  # moment is in it, and zooms to it; a hover shows the stack there; a
  # click clears; unchecking B in the thread filter hides its lane.
  def test_timeline_of_threads_taking_turns
    skip "Sonde cannot run here: #{Sonde.unsupported_reason}" unless Sonde.supported?
    profile, facts, = taking_turns_recording
    html = write_page(profile, "turns.pprof")
    data = PageData.parse(File.read(html))
    turns = facts["turns"].map { |name, from, to| [name, PageData.us_of(data, from), PageData.us_of(data, to)] }
    moments = turns.flat_map do |_, from, to|
      Array.new(PROBES) { |k| from + PROBE_MARGIN_US + k * (to - from - 2 * PROBE_MARGIN_US) / (PROBES - 1) }
    end
    probes = %w[A B].flat_map { |thread| moments.map { |us| { thread: thread, us: us } } }
    _, from, to = turns.select { |name, _, _| name == "A" }[1]
    drag = { from: from + PROBE_MARGIN_US, to: to - PROBE_MARGIN_US }
    zoom_probes = Array.new(PROBES) { |k| drag[:from] + (k + 1) * (drag[:to] - drag[:from]) / (PROBES + 1) }
                       .flat_map { |us| [{ thread: "A", us: us }, { thread: "B", us: us }] }
    result = @browser.timeline(html, probes: probes, drag: drag, hover: { thread: "A", us: (from + to) / 2 },
                                     zoomProbes: zoom_probes,
                                     uncheck: ["#threads input[value=\"#{data["threads"].index { |t| t[0] == "B" }}\"]"],
                                     screenshot: File.join(SCREENSHOTS, "timeline-taking-turns.png"),
                                     zoomScreenshot: File.join(SCREENSHOTS, "timeline-taking-turns-zoomed.png"))
    assert_empty result["errors"]
    names = result["names"].select { |name| name["visible"] }.map { |name| name["text"] }
    assert_equal %w[A B], (names & %w[A B]).sort, "lanes named A and B"
    assert_includes result["legend"], "running"

    running = result["colors"].fetch("running")
    colors = probes.zip(result["probes"]).group_by { |probe, _| probe[:thread] }
    colors.each do |thread, probed|
      probed.each_with_index do |(probe, color), i|
        owner = turns[i / PROBES][0]
        if owner == thread
          assert_equal running, color, "#{thread}'s lane at #{probe[:us]} µs, in its own turn"
        else
          refute_equal running, color, "#{thread}'s lane at #{probe[:us]} µs, in #{owner}'s turn"
        end
      end
    end

    range = result["range"]
    assert_in_delta drag[:from], range["from"], 5_000, "the drag's start (a pixel is about 3 ms)"
    assert_in_delta drag[:to], range["to"], 5_000
    type = data["defaultType"]
    in_range = PageData.moments(data).select { |m| m.end_us >= range["from"] && m.end_us <= range["to"] }
    assert_equal in_range.sum { |m| m.values[type] }, result["totalInRange"], "the flame graph's total is the range's"
    refute_equal result["totalBefore"], result["totalInRange"]
    assert_includes result["framesInRange"], "Object#burn_in_a"
    refute_includes result["framesInRange"], "Object#burn_in_b", "B burned in none of A's turn"
    assert_match(/\AA at \d+\.\d{3} s · running\n.*Object#burn_in_a/m, result["tooltip"])
    # Zoomed to the range: it spans the plot, A runs and B sleeps all along it.
    assert_in_delta range["from"], result["zoomedAxis"][0], 1, "the plot starts at the range's start"
    assert_equal [running, result["colors"].fetch("sleeping")] * PROBES, result["zoomed"]
    assert_equal({ "range" => nil, "total" => result["totalBefore"] }, result["afterClear"], "a click clears the range")
    lanes = result["lanes"].map { |lane| lane["name"] } - ["B"]
    assert_equal [lanes, lanes], [result["lanesAfterUncheck"], result["namesAfterUncheck"]], "B's lane hidden"
  end

  # Strip probes: the middle of 3 GC samples, and of 3 long runs (40
  # moments and more) of one endpoint with no GC within a second of them.
  def gc_and_span_probes(moments)
    gc = moments.select { |m| m.state == "gc" }
    gcs = gc.first(3).map { |m| { thread: m.thread, us: m.end_us - 5_000, strip: true } }
    runs = moments.slice_when { |a, b| a.thread != b.thread || a.set != b.set }.select { |run| run.size >= 40 && run[0].set >= 0 }
    quiet = runs.reject do |run|
      gc.any? { |m| m.thread == run[0].thread && m.end_us.between?(run[0].end_us - 1_000_000, run[-1].end_us + 1_000_000) }
    end
    spans = quiet.first(3).map { |run| { thread: run[0].thread, us: run[run.size / 2].end_us, strip: true, set: run[0].set } }
    assert_equal [3, 3], [gcs.size, spans.size], "the fixture has GC samples and long label spans"
    [gcs, spans]
  end

  # 4 threads of 10,000 timed samples (a 70-80 s profile at 100 Hz, 1.6 MB
  # page): the timeline is drawn, a drag folds the flame graph to its range.
  # Statistical. Its bounds against what 6 runs measured (3.1, headless
  # Chromium, 2 shared cores at load 3-5, 5 Dec 2026, VERBOSE=1): "timeline
  # drawn in" 47-95 ms, 0.09-0.19x its bound (<); "first paint at"
  # 1155-1773 ms, 0.29-0.44x (<; the flame graph's SVG is 500-700 ms of
  # it); "range refolded in" 196-323 ms, 0.13-0.22x (<).
  statistical def test_timeline_of_ten_thousand_samples_per_thread_renders_fast
    html = write_page(TimelineFixture.profile(threads: 4, samples_per_thread: 10_000), "timeline-big")
    data = PageData.parse(File.read(html))
    gcs, spans = gc_and_span_probes(PageData.moments(data))
    result = @browser.timeline(html, probes: gcs + spans, drag: { from: 20_000_000, to: 30_000_000 },
                                     hover: { thread: "worker-2", us: 25_000_000 },
                                     screenshot: File.join(SCREENSHOTS, "timeline-big.png"))
    assert_empty result["errors"]
    assert_equal [10_000] * 4, result["lanes"].map { |lane| lane["moments"] }
    gc_colors, span_colors = result["probes"].partition.with_index { |_, i| i < gcs.size }
    assert_equal [result["gcColor"]] * gcs.size, gc_colors, "GC pauses are marked beneath their lanes"
    assert_equal spans.map { |probe| result["spanColors"][probe[:set]] }, span_colors,
                 "a run of samples with the same endpoint is one span beneath its lane"
    type = data["defaultType"]
    in_range = PageData.moments(data).select { |m| m.end_us >= result["range"]["from"] && m.end_us <= result["range"]["to"] }
    assert_equal in_range.sum { |m| m.values[type] }, result["totalInRange"]
    assert_match(/\Aworker-2 at 2\d\.\d{3} s/, result["tooltip"])
    warn "\ntimeline of 4 x 10,000 samples (#{File.size(html) / 1024} KiB): drawn in #{result["timelineMs"].round} ms, " \
         "first paint at #{result["firstPaintMs"].round} ms, range refolded in #{result["refoldMs"].round} ms" if ENV["VERBOSE"]
    assert_operator result["timelineMs"], :<, TIMELINE_BUDGET_MS, "timeline drawn in #{result["timelineMs"].round} ms"
    assert_operator result["firstPaintMs"], :<, TIMELINE_FIRST_PAINT_BUDGET_MS,
                    "first paint at #{result["firstPaintMs"].round} ms"
    assert_operator result["refoldMs"], :<, TIMELINE_REFOLD_BUDGET_MS, "range refolded in #{result["refoldMs"].round} ms"
  end
end
