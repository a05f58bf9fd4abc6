# frozen_string_literal: true

require_relative "support/test_helper"
require "sonde/pprof_app"
require "cgi"
require "socket"
require "support/page_data"

# Sonde::PprofApp, driven as Rack drives it: what it serves, to whom, with
# which bounds, one capture at a time; and, in continuous mode, that a
# capture is a period of the run that the exporters still get whole.
class PprofAppTest < Minitest::Test
  include SondeTestHelper

  TOKEN = "t0ken-for-tests"

  def setup
    skip "Sonde cannot run here: #{Sonde.unsupported_reason}" unless Sonde.supported?
    @app = Sonde::PprofApp.new(token: TOKEN, max_seconds: 5)
  end

  def teardown
    Sonde.stop if Sonde.running?
  end

  def get(path, query = "", app: @app, **env)
    app.call({ "REQUEST_METHOD" => "GET", "PATH_INFO" => path, "QUERY_STRING" => query, "SCRIPT_NAME" => "/debug/pprof",
               "REMOTE_ADDR" => "10.1.2.3" }.merge(env))
  end

  # A thread that burns CPU for SECONDS of wall time; its value is what it
  # really used, as [wall clock ns, its own CPU clock ns] pairs every 5 ms
  # of CPU, so that a check compares a capture with the CPU the burner got
  # while it ran (on a busy machine, far less than the wall time).
  def burn_in_background(seconds)
    Thread.new do
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      clocks = [burner_clocks]
      x = 0
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        x += 1
        clocks << burner_clocks if x % 1000 == 0 && clocks.last[1] + 5_000_000 <= burner_clocks[1]
      end
      clocks << burner_clocks
    end
  end

  def burner_clocks
    [Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond),
     Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)]
  end

  # The burner's CPU inside the profile's window (its clocks from the first
  # pair inside it to the last: within 5 ms of CPU of the truth).
  def burner_cpu_during(clocks, profile)
    window = profile.time_nanos..(profile.time_nanos + profile.duration_nanos)
    inside = clocks.select { |wall, _cpu| window.cover?(wall) }
    inside.size < 2 ? 0 : inside.last[1] - inside.first[1]
  end

  # Most of the burner's CPU during the capture is in it (sampled CPU time
  # matches thread clocks within 1% in the sampling tests; 0.8 leaves the
  # edges of the window and the 5 ms steps of the burner's clock room), and
  # the burner did burn.
  def assert_capture_holds_the_burn(profile, clocks, what)
    burned = burner_cpu_during(clocks, profile)
    assert_operator burned, :>, 0.02e9, "#{what}: the burner got #{(burned / 1e6).round} ms of CPU in the capture"
    assert_operator total(profile, "cpu-time"), :>=, 0.8 * burned,
                    "#{what}: the capture's CPU time against the #{(burned / 1e6).round} ms the burner used in it"
  end

  # The profiles the dir: exporter wrote, oldest first.
  def exported_periods(dir)
    Dir[File.join(dir, "*.pprof")].map { |path| Sonde::Pprof.read(path) }.sort_by(&:time_nanos)
  end

  def assert_periods_follow_each_other(files)
    files.each_cons(2) do |earlier, later|
      assert_in_delta earlier.time_nanos + earlier.duration_nanos, later.time_nanos, 5_000_000, "no gap between periods"
    end
  end

  # Statistical. Its bounds against what 2 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the burning thread's CPU is in the capture" 1.16-6.54x its
  # bound (>); "the burning thread's CPU is in the capture" 1.06-1.07x its bound (>=); a bound
  # 1.22-1.41x its bound (>=); a bound 0.61-0.70x its bound (<).
  statistical def test_a_capture_is_a_pprof_of_the_seconds_asked
    burner = burn_in_background(1.5)
    status, headers, body = get("/profile", "seconds=1&token=#{TOKEN}")
    clocks = burner.value
    assert_equal 200, status, body.join
    assert_equal "application/octet-stream", headers["content-type"]
    profile = Sonde::Pprof.decode(body.join)
    # Beside a busy thread, a first capture that loaded Sonde's files then
    # began 1.36 s after its request (each file read gives up the GVL for a
    # 100 ms timeslice); they load with the endpoint now: 0-1 ms.
    late = (profile.time_nanos - clocks.first[0]) / 1e9
    assert_operator late, :<, 0.3, "the capture began #{late.round(3)} s after the busy thread did"
    # Starting and stopping Sonde come on top of the second asked.
    assert_operator profile.duration_nanos / 1e9, :>=, 1.0
    assert_operator profile.duration_nanos / 1e9, :<, 2.0
    assert_capture_holds_the_burn(profile, clocks, "the burning thread's CPU is in the capture")
    refute Sonde.running?, "a capture that started Sonde stops it"

    status, _headers, body = get("/profile", "seconds=1&sample=wall", "HTTP_AUTHORIZATION" => "Bearer #{TOKEN}")
    assert_equal 200, status
    assert_equal "wall-time", Sonde::Pprof.decode(body.join).default_sample_type
  end

  def test_every_request_needs_the_token
    [["/profile", "seconds=1"], ["/profile", "seconds=1&token=wrong-token"], ["/", ""], ["/flamegraph", "token="]].each do |path, query|
      status, headers, body = get(path, query)
      assert_equal 401, status, "#{path}?#{query}"
      assert_equal "Bearer", headers["www-authenticate"]
      refute_match(/profile|pprof\z/, body.join.lines.first.to_s[/\A\S+/].to_s)
    end
    assert_equal 401, get("/", "", "HTTP_AUTHORIZATION" => "Bearer wrong-token").first
    assert_equal 200, get("/", "token=#{TOKEN}").first
    refute Sonde.running?, "a refused request starts nothing"
  end

  # RFC 7235: the scheme is case-insensitive.
  def test_the_bearer_scheme_is_case_insensitive
    %w[bearer BEARER Bearer].each do |scheme|
      assert_equal 200, get("/", "", "HTTP_AUTHORIZATION" => "#{scheme} #{TOKEN}").first, scheme
    end
  end

  def test_without_a_token_only_allowed_loopback_is_served
    closed = Sonde::PprofApp.new
    assert_equal 403, get("/", "", app: closed, "REMOTE_ADDR" => "127.0.0.1").first
    loopback = Sonde::PprofApp.new(allow_loopback: true)
    assert_equal 200, get("/", "", app: loopback, "REMOTE_ADDR" => "127.0.0.1").first
    assert_equal 200, get("/", "", app: loopback, "REMOTE_ADDR" => "::1").first
    assert_equal 403, get("/", "", app: loopback, "REMOTE_ADDR" => "10.1.2.3").first
    assert_equal 403, get("/", "", app: loopback, "REMOTE_ADDR" => "127.0.0.1.evil.example").first
  end

  def test_bounds_and_errors_say_what_is_accepted_and_leak_nothing
    { "seconds=100000" => 400, "seconds=0" => 400, "seconds=abc" => 400, "seconds=6" => 400,
      "seconds=1&sample=gpu" => 400 }.each do |query, code|
      status, _headers, body = get("/profile", "#{query}&token=#{TOKEN}")
      assert_equal code, status, query
      assert_match(/\A(seconds: must be a whole number from 1 to 5|sample: must be cpu, wall, alloc, heap)\n\z/, body.join)
    end
    assert_equal 400, get("/flamegraph", "seconds=1&sample=gpu&token=#{TOKEN}").first
    status, _headers, body = get("/goroutine", "token=#{TOKEN}")
    assert_equal 404, status
    assert_equal "not found: the paths are /, /profile, /allocs, /heap and /flamegraph\n", body.join
    assert_equal 405, get("/profile", "token=#{TOKEN}", "REQUEST_METHOD" => "POST").first
    refute Sonde.running?
    error = assert_raises(Sonde::ArgumentError) { Sonde::PprofApp.new(token: "short") }
    assert_match(/at least 8 bytes/, error.message)
    assert_raises(Sonde::ArgumentError) { Sonde::PprofApp.new(token: TOKEN, max_seconds: 0) }
    assert_raises(Sonde::ArgumentError) { Sonde::PprofApp.new(token: TOKEN, rate: 0) }
  end

  def test_one_capture_at_a_time
    results = Array.new(2) { Thread.new { get("/profile", "seconds=1&token=#{TOKEN}") } }.map(&:value)
    assert_equal [200, 409], results.map(&:first).sort
    busy = results.find { |status, _, _| status == 409 }
    assert_match(/a capture is already running/, busy.last.join)
  end

  # The first two requests of a fresh process: the loser of the race is
  # told the capture is busy (409), never a 500 from a half-loaded Sonde.
  def test_the_first_two_captures_of_a_process_are_200_and_409
    stdout, stderr, status = run_ruby("-rsonde/pprof_app", "-e", <<~RUBY)
      app = Sonde::PprofApp.new(token: #{TOKEN.inspect})
      env = { "REQUEST_METHOD" => "GET", "PATH_INFO" => "/profile", "QUERY_STRING" => "seconds=1&token=#{TOKEN}",
              "REMOTE_ADDR" => "10.1.2.3" }
      responses = Array.new(2) { Thread.new { app.call(env.dup) } }.map(&:value)
      puts responses.map { |code, _, body| [code, code == 200 ? "pprof" : body.join.strip].inspect }.sort
    RUBY
    assert_succeeded status, stderr
    assert_match(/\A\[200, "pprof"\]\n\[409, "a capture is already running/, stdout)
  end

  # Two apps mounted in one process share a continuous run: its capture is
  # one at a time too (each app's own lock cannot see the other's).
  def test_in_continuous_mode_one_capture_at_a_time_across_apps
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, every: 60, export: "dir:#{dir}")
      other = Sonde::PprofApp.new(token: TOKEN, max_seconds: 5)
      results = [@app, other].map { |app| Thread.new { get("/profile", "seconds=1&token=#{TOKEN}", app: app) } }.map(&:value)
      assert_equal [200, 409], results.map(&:first).sort
      busy = results.find { |status, _, _| status == 409 }
      assert_match(/a capture is already running/, busy.last.join)
      status, = get("/profile", "seconds=1&token=#{TOKEN}", app: other)
      assert_equal 200, status, "the next capture runs once the first ended"
      Sonde.stop
    end
  end

  def test_a_run_started_by_the_application_is_its_own
    Sonde.start(rate: 50)
    status, _headers, body = get("/profile", "seconds=1&token=#{TOKEN}")
    assert_equal 409, status
    assert_match(/started by the application without continuous mode/, body.join)
    assert Sonde.running?, "the application's run goes on"
  end

  # In continuous mode a capture cuts the run's periods at its start and
  # end: the exporters get the periods before, during and after it, which
  # follow each other with no gap, and the capture is the middle one.
  # Statistical. Its bounds against what 2 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the capture of a continuous run" 1.06-2.72x its bound (>);
  # "the capture of a continuous run" 1.23-1.31x its bound (>=); "no gap between periods" 0 to 0 of
  # ±5e+06.
  statistical def test_in_continuous_mode_a_capture_shares_the_run_and_the_exports_stay_whole
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, every: 60, export: "dir:#{dir}?keep=10", service: "live")
      burner = burn_in_background(1.6)
      sleep 0.2
      status, _headers, body = get("/profile", "seconds=1&token=#{TOKEN}")
      clocks = burner.value
      assert_equal 200, status, body.join
      assert Sonde.running?, "the continuous run goes on"
      Sonde.stop
      captured = Sonde::Pprof.decode(body.join)
      files = exported_periods(dir)
      assert_equal 3, files.size, "before the capture, the capture, after it"
      assert_equal captured.time_nanos, files[1].time_nanos
      assert_equal captured.duration_nanos, files[1].duration_nanos
      assert_periods_follow_each_other(files)
      assert_capture_holds_the_burn(captured, clocks, "the capture of a continuous run")
      assert_includes captured.comments, "service=live", "the capture is tagged like every export"
    end
  end

  # The flusher's ticks inside a capture are skipped: with every: 1 a
  # 3-second capture spans 3 seconds, not what followed the flusher's last
  # tick (a Puma test once got 27 ms), and the ticks resume after it.
  # Statistical. Its bounds against what 2 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the burner's CPU over the 3 seconds" 4.32-8.56x its bound
  # (>); "the burner's CPU over the 3 seconds" 1.24-1.25x its bound (>=); "no gap between periods" 0
  # to 0 of ±5e+06; "the capture spans the seconds asked" 0.0237 to 0.124 of ±0.25; "the flusher
  # ticks again after the capture" 2.00-2.00x its bound (>=); "no period longer than the capture or
  # `every`" 0.93-0.96x its bound (<).
  statistical def test_in_continuous_mode_the_flusher_does_not_cut_a_capture_short
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, every: 1, export: "dir:#{dir}?keep=50", service: "live")
      burner = burn_in_background(5.0)
      sleep 0.5
      status, _headers, body = get("/profile", "seconds=3&token=#{TOKEN}")
      assert_equal 200, status, body.join
      sleep 1.5
      clocks = burner.value
      Sonde.stop
      captured = Sonde::Pprof.decode(body.join)
      assert_in_delta 3.0, captured.duration_nanos / 1e9, 0.25, "the capture spans the seconds asked"
      assert_capture_holds_the_burn(captured, clocks, "the burner's CPU over the 3 seconds")
      files = exported_periods(dir)
      at = files.index { |file| file.time_nanos == captured.time_nanos }
      refute_nil at, "the capture is one of the exported periods"
      assert_equal captured.duration_nanos, files[at].duration_nanos
      assert_operator files.size - at - 1, :>=, 1, "the flusher ticks again after the capture"
      assert_periods_follow_each_other(files)
      longest = files.map(&:duration_nanos).max / 1e9
      assert_operator longest, :<, 3.25, "no period longer than the capture or `every`"
    end
  end

  # A thread that makes CapturedThing objects and keeps one in ten, for
  # seconds: what /allocs and /heap must find.
  class CapturedThing; end

  def allocate_in_background(seconds, kept)
    Thread.new do
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      i = 0
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        thing = CapturedThing.new
        kept << thing if (i % 10).zero?
        i += 1
      end
      i
    end
  end

  def things(profile, type)
    total(profile, type) { |sample| sample.labels["allocation class"] == CapturedThing.name }
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the allocating thread's objects are in /allocs" 8.36-9.16x
  # its bound (>); "the allocating thread's objects are in /allocs" 7.61-7.61x its bound (>).
  statistical def test_allocs_and_heap_captures_sample_what_they_serve
    kept = []
    allocator = allocate_in_background(1.5, kept)
    status, _headers, body = get("/allocs", "seconds=1&token=#{TOKEN}")
    made = allocator.value
    assert_equal 200, status, body.join
    refute Sonde.running?, "a capture that started Sonde stops it"
    allocs = Sonde::Pprof.decode(body.join)
    assert_equal "alloc-samples", allocs.default_sample_type
    # About two thirds of what the thread made were made during the capture.
    assert_operator things(allocs, "alloc-samples"), :>, made / 10, "the allocating thread's objects are in /allocs"

    kept.clear
    allocator = allocate_in_background(1.5, kept)
    status, _headers, body = get("/heap", "seconds=1&token=#{TOKEN}")
    allocator.join
    assert_equal 200, status, body.join
    heap = Sonde::Pprof.decode(body.join)
    assert_equal "heap-live-size", heap.default_sample_type
    assert_operator things(heap, "heap-live-samples"), :>, 0, "the kept objects are in /heap"
    assert_operator things(heap, "heap-live-size"), :>, 0
    assert_equal heap.default_sample_type, Sonde::Pprof.decode(get("/profile", "seconds=1&sample=heap&token=#{TOKEN}")
      .last.join).default_sample_type
  end

  def test_settings_from_the_environment_that_refuse_a_capture_are_named
    previous = ENV.fetch("SONDE_ALLOC", nil)
    ENV["SONDE_ALLOC"] = "0"
    status, _headers, body = get("/heap", "seconds=1&token=#{TOKEN}")
    assert_equal 409, status
    assert_match(/\Athis capture cannot start Sonde: heap: true needs allocation sampling, but SONDE_ALLOC=0/, body.join)
    refute Sonde.running?
  ensure
    ENV["SONDE_ALLOC"] = previous
  end

  # Routes are drawn in every Rails process (console, rake, runner): a
  # mistyped SONDE_EVERY crashed each one's boot at the README's mount line.
  def test_a_bad_environment_setting_refuses_the_capture_not_the_boot
    previous = ENV.fetch("SONDE_EVERY", nil)
    ENV["SONDE_EVERY"] = "-1"
    app = Sonde::PprofApp.new(token: TOKEN)
    status, _headers, body = get("/profile", "seconds=1&token=#{TOKEN}", app: app)
    assert_equal 409, status
    assert_match(/\Athis capture cannot start Sonde: SONDE_EVERY="-1": every must be a number of seconds/, body.join)
    refute Sonde.running?
  ensure
    ENV["SONDE_EVERY"] = previous
  end

  def test_a_continuous_run_serves_only_what_it_samples
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, every: 60, export: "dir:#{dir}")
      status, _headers, body = get("/allocs", "seconds=1&token=#{TOKEN}")
      assert_equal 409, status
      assert_equal "the continuous run does not sample allocations: start it with alloc: true (SONDE_ALLOC=1)\n", body.join
      status, _headers, body = get("/flamegraph", "seconds=1&sample=heap&token=#{TOKEN}")
      assert_equal 409, status
      assert_match(/does not follow the live heap: start it with heap: true/, body.join)
      assert Sonde.running?, "the continuous run goes on"
      Sonde.stop

      Sonde.start(continuous: true, every: 60, export: "dir:#{dir}", alloc: true)
      kept = []
      allocator = allocate_in_background(1.5, kept)
      status, _headers, body = get("/allocs", "seconds=1&token=#{TOKEN}")
      allocator.join
      assert_equal 200, status, body.join
      assert_operator things(Sonde::Pprof.decode(body.join), "alloc-samples"), :>, 0
      assert_equal 409, get("/heap", "seconds=1&token=#{TOKEN}").first, "alloc: true alone follows no heap"
      Sonde.stop # before the directory goes: the stop writes the last period into it
    end
  end

  def test_the_flame_graph_page_of_a_capture
    status, headers, body = get("/flamegraph", "seconds=1&token=#{TOKEN}")
    assert_equal 200, status
    assert_equal "text/html; charset=utf-8", headers["content-type"]
    assert_match(/<html/i, body.join)
    refute_nil PageData.parse(body.join)["timeline"], "a capture that starts Sonde keeps moments: the page has a timeline"
    index = get("/", "token=#{TOKEN}").last.join
    assert_includes index, %(href="/debug/pprof/profile?seconds=30&amp;token=#{TOKEN}")
  end

  # A click on the index sends no Authorization header: every link carries
  # the token the page was opened with, however it came.
  def test_the_index_links_carry_the_token
    [["token=#{TOKEN}", {}], ["", { "HTTP_AUTHORIZATION" => "Bearer #{TOKEN}" }]].each do |query, headers|
      page = get("/", query, **headers).last.join
      links = page.scan(/href="([^"]+)"/).flatten
      assert_equal 4, links.size
      links.each { |link| assert_includes CGI.unescapeHTML(link), "token=#{TOKEN}", link }
    end
  end

  def test_a_wrong_token_is_told_apart_from_a_missing_one
    assert_equal "wrong token\n", get("/", "token=not-the-token").last.join
    assert_equal "wrong token\n", get("/", "", "HTTP_AUTHORIZATION" => "Bearer not-the-token").last.join
    assert_match(/\Aa token is needed/, get("/", "").last.join)
    assert_equal 200, get("/", "", "HTTP_AUTHORIZATION" => "bearer #{TOKEN}").first, "the scheme is case-insensitive"
    assert_equal 200, get("/", "seconds=1&token=#{TOKEN}&sample=wall").first, "the token anywhere in the query"
  end

  # The documented Rails line (README, docs/rails-and-rack.md) reads ENV["SONDE_PPROF_TOKEN"]: a boot without
  # it (console, rake, assets) works, and the endpoint says why it serves
  # nothing.
  def test_without_a_token_the_refusal_says_how_to_configure_one
    status, _headers, body = get("/profile", "seconds=1", app: Sonde::PprofApp.new(token: ENV["SONDE_UNSET_TOKEN"]))
    assert_equal 403, status
    assert_match(/no token configured.*token:.*SONDE_PPROF_TOKEN.*allow_loopback: true/, body.join)
  end

  # The token is checked before the query is parsed, and a huge query is
  # refused unread (10 KB without a token cost 31-44 ms to parse).
  def test_a_long_query_is_refused_before_it_is_parsed
    status, _headers, body = get("/", "a=#{"%41" * 5000}&token=#{TOKEN}")
    assert_equal 414, status
    assert_equal "the query is over 4096 bytes\n", body.join
    require "minitest/mock"
    @app.stub(:query_params, ->(_query) { flunk "the query was parsed before the token was checked" }) do
      assert_equal 401, get("/", "#{"a=%41&" * 500}x=1").first
      assert_equal 401, get("/", "a=1&token=wrong-token").first
    end
  end

  # Go's handler stops when its request goes away: a client that gives up
  # must not hold the capture (and so every other capture) for its seconds.
  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 0.40-0.40x its bound (<); a bound 0.41-0.41x its
  # bound (<).
  statistical def test_a_capture_ends_soon_after_its_client_goes_away
    server = TCPServer.new("127.0.0.1", 0)
    client = TCPSocket.new("127.0.0.1", server.addr[1])
    socket = server.accept
    closer = Thread.new { sleep 0.5; client.close }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    get("/profile", "seconds=5&token=#{TOKEN}", "puma.socket" => socket)
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    closer.join
    assert_operator elapsed, :<, 0.5 + 1.0, "the capture ended within a second of the client leaving"
    assert_equal 200, get("/profile", "seconds=1&token=#{TOKEN}").first, "the next capture is not refused"
  ensure
    [socket, server].each { |io| io&.close }
  end

  # The request that asked for the capture sleeps through it; it is not in
  # the profile it answers (nor in a continuous run's periods meanwhile).
  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the other threads are in it" 9.37-9.52x its bound (>); "the
  # other threads are in it" 9.34-9.34x its bound (>).
  statistical def test_the_capture_request_is_not_in_its_own_profile
    burner = burn_in_background(1.3)
    status, body = capture_from_a_thread_named_capturer
    burner.join
    assert_capturer_left_out(status, body)
  end

  # A 1-second wall capture asked for by a thread named "capturer", under
  # the endpoint GET /debug; returns [status, body].
  def capture_from_a_thread_named_capturer
    capturer = Thread.new do
      Thread.current.name = "capturer"
      Sonde.with_labels(endpoint: "GET /debug") { get("/profile", "seconds=1&sample=wall&token=#{TOKEN}") }
    end
    status, _headers, body = capturer.value
    [status, body]
  end

  def assert_capturer_left_out(status, body)
    assert_equal 200, status, body.join
    profile = Sonde::Pprof.decode(body.join)
    mine = profile.samples.select do |sample|
      sample.labels["thread name"] == "capturer" || sample.labels["endpoint"] == "GET /debug"
    end
    assert_empty mine.map { |sample| [sample.labels, sample.values, profile.frames(sample).first(3)] }
    assert_operator total(profile, "wall-time"), :>, 0.5e9, "the other threads are in it"
  end

  # In continuous mode too, from the flush that opens the capture: that
  # flush encodes the period before with the GVL released, and a pass on
  # the busy thread meanwhile put the capturer's wait for the GVL, in
  # Native.flush, into the capture (5 runs of 5 before the fix). Exact: no
  # sample of the capturer, whatever the timing.
  def test_in_continuous_mode_the_capture_request_is_not_in_its_own_profile
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, every: 60, export: "dir:#{dir}?keep=10", service: "live")
      burner = burn_in_background(1.3)
      sleep 0.1
      status, body = capture_from_a_thread_named_capturer
      burner.join
      Sonde.stop
      assert_capturer_left_out(status, body)
    end
  end
end
