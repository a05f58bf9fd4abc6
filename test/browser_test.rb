# frozen_string_literal: true

require_relative "support/test_helper"
require "fileutils"
require "sonde/flamegraph"
require "support/derived_fixture"
require "support/allocation_fixture"
require "support/node_deps"

# The flame graph page in headless Chromium (Debian's `chromium`, driven by
# puppeteer-core): it renders the expected frames, zooms on a click,
# switches to wall time, to allocations and to the live heap, searches,
# shows a tooltip, and opens fast on a big profile. Screenshots go to test/artifacts/.
class BrowserTest < Minitest::Test
  ARTIFACTS = File.join(SondeTestHelper::ROOT, "test", "artifacts")
  # The issue's bar: open and first paint of a 60 s, 8-thread profile under 1 s.
  FIRST_PAINT_BUDGET_MS = 1000

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

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 7.39-7.39x its bound (>); "frames under the zoomed
  # one" 77.15-77.15x its bound (>); "first paint at 763 ms (budget 1000 ms)" 0.33-0.76x its bound
  # (<).
  statistical def test_big_profile_opens_and_paints_within_a_second
    html = write_page(DerivedFixture.big_profile, "big")
    result = @browser.flamegraph(html, click: "Module3::Class3#method_3", screenshot: File.join(ARTIFACTS, "flamegraph-big.png"))
    assert_empty result["errors"]
    assert_operator result["before"].size, :>, 100
    # Frames too narrow to draw were left out; zooming in brings them back.
    zoomed = result["afterClick"].reject { |f| f["fade"] }
    assert_operator zoomed.size, :>, 100, "frames under the zoomed one"
    warn "\nflame graph page of a 60 s, 8-thread profile (#{File.size(html) / 1024} KiB): first paint at " \
         "#{result["firstPaintMs"].round} ms, page ready in #{result["openedMs"]} ms" if ENV["VERBOSE"]
    assert_operator result["firstPaintMs"], :<, FIRST_PAINT_BUDGET_MS,
                    "first paint at #{result["firstPaintMs"].round} ms (budget #{FIRST_PAINT_BUDGET_MS} ms)"
  end
end
