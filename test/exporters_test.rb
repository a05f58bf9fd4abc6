# frozen_string_literal: true

require_relative "support/test_helper"
require_relative "support/http_test_server"
require_relative "support/exporter_test_helpers"
require "sonde/exporters"

# The exporters of continuous mode: what each sends, checked as the real
# service would check it; what they do when the target is down, failing,
# silent or slow; and that none of it slows the application down.
class ExportersTest < Minitest::Test
  include SondeTestHelper

  include ExporterTestHelpers

  # --- parse -----------------------------------------------------------------

  def test_parse_builds_each_kind
    dir = Dir.mktmpdir
    list = exporters("dir:#{dir}/new, pyroscope:https://pyro.example:4040, datadog:http://127.0.0.1:8126")
    assert_equal [Sonde::Exporters::Directory, Sonde::Exporters::Pyroscope, Sonde::Exporters::Datadog],
                 list.map(&:class)
    assert File.directory?("#{dir}/new"), "dir: creates its directory at parse time"
    assert_equal 2, exporters(["dir:#{dir}", "datadog:http://127.0.0.1:1"]).size
    assert_empty exporters(nil)
    assert_empty exporters("  ")
  ensure
    FileUtils.rm_rf(dir)
  end

  def test_parse_errors_name_the_variable_the_value_and_what_is_accepted
    {
      "ftp://host" => /unknown exporter "ftp"/,
      "pyroscope:ftp://host" => /scheme must be http or https/,
      "datadog:http://" => /no host/,
      "pyroscope:http://h/x?y=1" => /unknown option "y" for pyroscope: its options are timeout, token, basic_auth, tenant, queue_size, max_attempts/,
      "pyroscope:http://h/x#top" => /fragment/,
      "dir:" => /directory is missing/,
      "dir:/proc/sonde/x" => /cannot create directory/,
      "dir:/tmp,,datadog:http://h" => /empty entry/
    }.each do |spec, reason|
      error = assert_raises(Sonde::ArgumentError, spec) { Sonde::Exporters.parse(spec) }
      assert_match(/\ASONDE_EXPORT=#{Regexp.escape(spec.inspect)}: not accepted: /, error.message)
      assert_match reason, error.message
      assert_match(/accepted: one or more of dir:PATH, pyroscope:URL, datadog:URL, otlp:URL, comma-separated/, error.message)
    end
    error = assert_raises(Sonde::ArgumentError) { Sonde::Exporters.parse("zipkin:x", option_name: "--export") }
    assert_match(/\A--export: "zipkin:x"/, error.message)
    error = assert_raises(Sonde::ArgumentError) { Sonde::Exporters.parse("pyroscope:http://bob:s3cret@h/?q") }
    refute_match(/s3cret/, error.message, "credentials must not end up in logs")
  end

  def test_parse_validates_every_setting
    {
      { keep: 0 } => /keep must be an Integer from 1 to/,
      { timeout: 0 } => /timeout must be a number of seconds above 0/,
      { queue_size: "4" } => /queue_size must be an Integer from 1 to 1000.*"4" \(String\)/,
      { max_attempts: 11 } => /max_attempts must be an Integer from 1 to 10/,
      { service: "" } => /service must be a non-empty String/,
      { basic_auth: "no-colon" } => /basic_auth must be "user:password".*got \(hidden, String\)/,
      { token: "" } => /token must be a non-empty String.*got \(hidden, String\)/,
      { token: "a", basic_auth: "b:c" } => /token and basic_auth cannot both be given/,
      { max_bytes: 0 } => /max_bytes must be a positive Integer of bytes/,
      { tenant: "a\nb" } => /tenant must be a non-empty String without control characters/,
      { colour: :blue } => /unknown exporter option :colour; accepted: :keep, :max_bytes, :timeout/
    }.each do |settings, message|
      error = assert_raises(Sonde::ArgumentError, settings.inspect) { Sonde::Exporters.parse("datadog:http://h", **settings) }
      assert_match message, error.message
    end
  end

  # --- directory ---------------------------------------------------------------

  def test_directory_writes_named_files_and_keeps_the_newest_of_this_process
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "shop-worker-1-20240101T000000Z.pprof"), "another service")
      File.write(File.join(dir, "notes.txt"), "not a profile")
      old = File.join(dir, "shop-1-20200101T000000Z.pprof") # this service, another process, older: kept
      File.write(old, "old")
      File.utime(Time.now - 3600, Time.now - 3600, old)
      writer = exporter("dir:#{dir}", keep: 3)
      4.times { |i| writer.export(profile(start: START + (i / 2))) } # two profiles per second
      assert writer.shutdown(timeout: 5)
      assert_equal({ exported: 4, failed: 0, dropped: 0, retries: 0, last_error: nil }, writer.stats)

      stamp = ->(t) { t.utc.strftime("%Y%m%dT%H%M%SZ") }
      kept = Dir.children(dir).sort
      expected = ["shop-#{Process.pid}-#{stamp[START]}-2.pprof", "shop-#{Process.pid}-#{stamp[START + 1]}.pprof",
                  "shop-#{Process.pid}-#{stamp[START + 1]}-2.pprof"]
      assert_equal (expected + ["notes.txt", "shop-1-20200101T000000Z.pprof", "shop-worker-1-20240101T000000Z.pprof"]).sort,
                   kept
      expected.each { |name| assert_decodes(File.binread(File.join(dir, name))) }
    end
  end

  def test_directory_never_shows_a_partial_file
    Dir.mktmpdir do |dir|
      writer = exporter("dir:#{dir}", keep: 2, queue_size: 50)
      seen = 0
      problems = []
      done = false
      reader = Thread.new do
        until done
          Dir.glob(File.join(dir, "*.pprof")).each do |path|
            Sonde::Pprof.decode(File.binread(path))
            seen += 1
          rescue Errno::ENOENT
            nil # removed by retention between the listing and the read
          rescue Sonde::Pprof::DecodeError => e
            problems << "#{File.basename(path)}: #{e.message}"
          end
        end
      end
      40.times { |i| writer.export(profile(start: START + i)) }
      assert writer.shutdown(timeout: 10)
      done = true
      reader.join
      assert_empty problems
      assert_operator seen, :>, 0, "the reader saw no file at all"
      assert_equal 40, writer.stats[:exported]
      assert_equal 2, Dir.glob(File.join(dir, "*.pprof")).size
      assert_empty Dir.glob(File.join(dir, "*tmp*"), File::FNM_DOTMATCH), "a temporary file was left behind"
    end
  end

  def test_directory_that_became_unwritable_fails_without_raising
    Dir.mktmpdir do |dir|
      writer = exporter("dir:#{dir}/gone", max_attempts: 2)
      FileUtils.rm_rf("#{dir}/gone")
      assert writer.export(profile)
      assert wait_until { settled?(writer, 1) }
      stats = writer.stats
      assert_equal [0, 1, 1], stats.values_at(:exported, :failed, :retries)
      assert_match(/cannot write a profile in .*gone/, stats[:last_error])
    end
  end

  # --- Pyroscope -----------------------------------------------------------------

  # What Pyroscope's /ingest handler reads for format=pprof: the query
  # parameters, and the multipart field "profile" holding the pprof.
  def assert_pyroscope_ingest(request, base_path: "")
    assert_equal "POST", request.method
    assert_equal "#{base_path}/ingest", request.path
    params = request.params
    assert_equal "shop{env=prod,host=web-1,pid=4242,runtime_version=#{RUBY_VERSION}," \
                 "sonde_version=#{Sonde::VERSION},team_name=core,version=1.2}", params["name"]
    assert_equal [START.to_i.to_s, (START + PERIOD).to_i.to_s], params.values_at("from", "until")
    assert_equal "pprof", params["format"]
    assert_equal "sonde", params["spyName"]
    refute params.key?("sampleRate"), "for pprof the rate comes from the profile"
    assert_includes request.query, "name=shop%7Benv%3Dprod%2C", "the name is URL-encoded as a whole"
    assert_equal request.body.bytesize, request.headers["content-length"].to_i
    part = request.parts.fetch("profile")
    assert_equal "profile.pprof", part.filename
    assert_decodes(part.body)
  end

  def test_pyroscope_sends_what_the_ingest_api_reads
    target = server(status: 200)
    pyroscope = exporter("pyroscope:#{target.url}")
    pyroscope.export(profile)
    assert pyroscope.shutdown(timeout: 5)
    assert_equal 1, pyroscope.stats[:exported]
    request = target.requests.fetch(0)
    assert_pyroscope_ingest(request)
    refute request.headers.key?("authorization")
    refute request.headers.key?("x-scope-orgid")
  end

  def test_pyroscope_auth_and_tenant
    target = server(status: 200)
    # The entry's own options (the SONDE_EXPORT syntax, %XX-decoded), and
    # the Hash form.
    basic = exporter("pyroscope:#{target.url}/pyroscope/?basic_auth=bob:pa%3Ass&tenant=team-a")
    basic.export(profile)
    token = exporter([{ kind: :pyroscope, url: target.url, token: "t0ken" }])
    token.export(profile)
    in_url = exporter("pyroscope:http://alice:p%40ss@127.0.0.1:#{target.port}")
    in_url.export(profile)
    [basic, token, in_url].each { |e| assert e.shutdown(timeout: 5) }
    # On a loaded machine a request can time out and be retried (TIMEOUT is
    # short): one of each kind is what is checked.
    first, second, third = target.requests.group_by { |r| r.headers["authorization"].to_s }
                                 .reject { |auth, _| auth.empty? }.sort.map { |_auth, requests| requests.last }
    assert_equal "Basic #{["alice:p@ss"].pack("m0")}", first.headers["authorization"]
    assert_equal "Basic #{["bob:pa:ss"].pack("m0")}", second.headers["authorization"]
    assert_equal "team-a", second.headers["x-scope-orgid"]
    assert_pyroscope_ingest(second, base_path: "/pyroscope")
    assert_equal "Bearer t0ken", third.headers["authorization"]
  end

  # --- Datadog -------------------------------------------------------------------

  # What the agent's /profiling/v1/input forwards and the intake reads: a
  # multipart form whose "event" part lists the attachments, each of which
  # is a part of its own.
  def test_datadog_sends_what_the_agent_intake_reads
    target = server(status: 202)
    datadog = exporter("datadog:#{target.url}")
    datadog.export(profile)
    assert datadog.shutdown(timeout: 5)
    assert_equal 1, datadog.stats[:exported]
    request = target.requests.fetch(0)
    assert_equal "POST", request.method
    assert_equal "/profiling/v1/input", request.path
    assert_nil request.query
    assert_equal "sonde", request.headers["dd-evp-origin"]
    assert_equal Sonde::VERSION, request.headers["dd-evp-origin-version"]
    parts = request.parts
    event_part = parts.fetch("event")
    assert_equal ["event.json", "application/json"], [event_part.filename, event_part.content_type]
    event = JSON.parse(event_part.body)
    assert_equal ["rubyprofile.pprof"], event["attachments"]
    assert_equal %w[ruby 4], event.values_at("family", "version")
    assert_equal START, Time.iso8601(event["start"])
    assert_equal START + PERIOD, Time.iso8601(event["end"])
    tags = event["tags_profiler"].split(",")
    %w[service:shop env:prod version:1.2 host:web-1 process_id:4242 language:ruby runtime:ruby team.name:core]
      .each { |tag| assert_includes tags, tag }
    assert_includes tags, "sonde_version:#{Sonde::VERSION}"
    assert_equal tags.size, tags.map { |t| t.split(":", 2).first }.uniq.size, "a tag name appears twice"
    event["attachments"].each do |name|
      part = parts.fetch(name)
      assert_equal name, part.filename
      assert_decodes(part.body)
    end
  end

  # Datadog links profiles to traces by "span id" and "local root span id",
  # numbers (all 64 bits, as its own profiler writes them): the profile it
  # gets has them so, on the samples that ran in the span; Sonde's hex
  # span_id is gone from them, the rest is as it was.
  def test_datadog_gets_span_ids_as_the_numbers_its_backend_reads
    traced = ExporterTestHelpers.profile_from(<<~RUBY)
      #{SondeTestHelper::BURN_SCRIPT}
      Sonde.start(rate: 250)
      Sonde.with_labels(endpoint: "UsersController#show") do
        Sonde.with_trace_context(trace_id: "4bf92f3577b34da6a3ce929d0e0e4736", span_id: "fedcba9876543210",
                                 local_root_span_id: 42) { burn(0.15) }
      end
      burn(0.05)
      $stdout.binmode
      $stdout.write(Sonde.stop.pprof)
    RUBY
    target = server(status: 202)
    datadog = exporter("datadog:#{target.url}")
    datadog.export(Sonde::ExportedProfile.new(pprof: traced, start_time: START, end_time: START + PERIOD, tags: TAGS))
    assert datadog.shutdown(timeout: 5)
    sent = Sonde::Pprof.decode(target.requests.fetch(0).parts.fetch("rubyprofile.pprof").body)
    in_span = sent.samples.select { |sample| sample.labels.key?("span id") }
    refute_empty in_span
    in_span.each do |sample|
      assert_equal [0xfedcba9876543210 - (1 << 64), 42], sample.labels.values_at("span id", "local root span id")
      assert_equal ["UsersController#show", "4bf92f3577b34da6a3ce929d0e0e4736"],
                   sample.labels.values_at("trace endpoint", "trace_id")
      refute sample.labels.key?("span_id")
      refute sample.labels.key?("local_root_span_id")
    end
    assert(sent.samples.any? { |sample| !sample.labels.key?("span id") }, "samples outside the span keep none")
  end

  # Datadog's endpoint profiling reads the endpoint as "trace endpoint":
  # the profile it gets names the label so, on the same samples.
  def test_datadog_gets_the_endpoint_under_its_own_label_name
    target = server(status: 202)
    datadog = exporter("datadog:#{target.url}")
    labelled = Sonde::ExportedProfile.new(pprof: ExporterTestHelpers.labelled_pprof_bytes, start_time: START,
                                          end_time: START + PERIOD, tags: TAGS)
    datadog.export(labelled)
    assert datadog.shutdown(timeout: 5)
    sent = Sonde::Pprof.decode(target.requests.fetch(0).parts.fetch("rubyprofile.pprof").body)
    endpoints = sent.samples.map { |s| s.labels["trace endpoint"] }.compact.uniq.sort
    assert_equal ["GET /users", "POST /orders"], endpoints
    assert(sent.samples.none? { |s| s.labels.key?("endpoint") })
    assert_equal Sonde::Pprof.decode(labelled.pprof).samples.size, sent.samples.size
  end

  # --- when the target misbehaves ---------------------------------------------

  HTTP_KINDS = %w[pyroscope datadog].freeze

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "pyroscope" 0.36-0.38x its bound (<).
  statistical def test_down_target_fails_after_retries_quickly
    port = closed_port
    HTTP_KINDS.each do |kind|
      down = exporter("#{kind}:http://127.0.0.1:#{port}")
      started = monotonic_now
      down.export(profile)
      assert wait_until { settled?(down, 1) }, "#{kind}: never gave up"
      elapsed = monotonic_now - started
      stats = down.stats
      assert_equal [0, 1, 2], stats.values_at(:exported, :failed, :retries), kind
      assert_match(/ECONNREFUSED|Connection refused/, stats[:last_error])
      # Two backoffs (0.5 s, then what is left of the 3 x 0.3 s budget).
      assert_operator elapsed, :<, 2.5, "#{kind}: giving up took #{elapsed.round(2)} s"
    end
  end

  def test_server_errors_are_retried_then_counted_as_failed
    HTTP_KINDS.each do |kind|
      target = server(status: 500)
      failing = exporter("#{kind}:#{target.url}")
      failing.export(profile)
      assert wait_until { settled?(failing, 1) }
      assert_equal [0, 1, 2], failing.stats.values_at(:exported, :failed, :retries), kind
      assert_equal 3, target.requests.size, "#{kind}: max_attempts requests"
      assert_match(/HTTP 500 from http:\/\/127.0.0.1:\d+\//, failing.stats[:last_error])
    end
  end

  # A user who sees an empty directory or backend must find why in the log:
  # the first failure says so, later ones are counted, and the first failure
  # after a success says so again.
  def test_a_failing_exporter_warns_once_per_run_of_failures
    target = server(status: 500)
    failing = exporter("pyroscope:#{target.url}", max_attempts: 1)
    _out, err = capture_io do
      2.times { |i| failing.export(profile) && wait_until { settled?(failing, i + 1) } }
      target.status = 200
      failing.export(profile)
      assert wait_until { failing.stats[:exported] == 1 }
      target.status = 500
      failing.export(profile)
      assert wait_until { settled?(failing, 4) }
    end
    warnings = err.lines.grep(/sonde: the pyroscope exporter failed/)
    assert_equal 2, warnings.size, "one warning for each run of failures: #{err}"
    assert_match(/in process #{Process.pid} .*HTTP 500 from http:/, warnings.first)
    assert_equal [1, 3], failing.stats.values_at(:exported, :failed)
  end

  # Sonde's own threads load no Ruby file: a require there runs beside the
  # application's boot (a Rails app booting in Sidekiq on 3.4 died 1 time
  # in 12 with a LoadError for a file it has while the exporter thread
  # loaded net/http, 12 files, at its first post). Each HTTP exporter, in
  # a fresh process, through a failed post: $LOADED_FEATURES is the same
  # after it as right after Sonde.start.
  def test_exporter_threads_load_no_file_after_start
    script = <<~RUBY
      require "json"
      require "sonde"
      Sonde.start(continuous: true, every: 1, export: "\#{ARGV[0]}?max_attempts=1", service: "boot")
      before = $LOADED_FEATURES.dup
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
      sleep 0.05 until Sonde.stats[:exporters].first[:failed] >= 1 ||
                       Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      stats = Sonde.stats[:exporters].first
      Sonde.stop
      puts JSON.generate(added: $LOADED_FEATURES - before, failed: stats[:failed])
    RUBY
    port = free_port # nothing listens: the post fails at connect, after loading what it needs
    %w[pyroscope datadog otlp].each do |kind|
      out, err, status = run_ruby("-e", script, "#{kind}:http://127.0.0.1:#{port}", gems: true)
      assert status.success?, "#{kind}: #{err}"
      result = JSON.parse(out.lines.last)
      assert_equal 1, result["failed"], "#{kind}: the post was tried: #{err}"
      assert_empty result["added"], "#{kind}: files loaded on Sonde's threads after start"
    end
  end

  def test_too_many_requests_is_retried_and_can_succeed
    target = server(status: 429)
    pyroscope = exporter("pyroscope:#{target.url}")
    pyroscope.export(profile)
    assert target.wait_for_requests(1)
    target.status = 200
    assert wait_until { settled?(pyroscope, 1) }
    assert_equal [1, 0, 1], pyroscope.stats.values_at(:exported, :failed, :retries)
  end

  def test_client_errors_are_not_retried
    HTTP_KINDS.each do |kind|
      target = server(status: 400)
      refused = exporter("#{kind}:#{target.url}")
      refused.export(profile)
      assert wait_until { settled?(refused, 1) }
      assert_equal [0, 1, 0], refused.stats.values_at(:exported, :failed, :retries), kind
      assert_equal 1, target.requests.size
      assert_match(/HTTP 400/, refused.stats[:last_error])
    end
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 1.01-1.38x its bound (>=); "pyroscope" 0.17-0.23x its
  # bound (<).
  statistical def test_target_that_never_answers_times_out
    HTTP_KINDS.each do |kind|
      target = server(status: :hang)
      silent = exporter("#{kind}:#{target.url}", max_attempts: 1)
      started = monotonic_now
      silent.export(profile)
      assert wait_until { settled?(silent, 1) }
      elapsed = monotonic_now - started
      assert_equal 1, silent.stats[:failed]
      assert_match(/ReadTimeout/, silent.stats[:last_error])
      assert_operator elapsed, :>=, TIMEOUT
      assert_operator elapsed, :<, TIMEOUT + 1.5, "#{kind}: the timeout was not respected"
    end
  end

  def test_a_broken_profile_is_a_failure_not_an_exception
    target = server(status: 200)
    pyroscope = exporter("pyroscope:#{target.url}")
    assert pyroscope.export(Sonde::ExportedProfile.new(pprof: nil, start_time: START, end_time: START, tags: {}))
    assert wait_until { settled?(pyroscope, 1) }
    assert_equal 1, pyroscope.stats[:failed]
    assert_match(/NoMethodError/, pyroscope.stats[:last_error])
    pyroscope.export(profile) # the thread survived
    assert wait_until { pyroscope.stats[:exported] == 1 }
  end

  def test_export_never_raises_even_when_no_thread_can_start
    require "minitest/mock"
    datadog = exporter("datadog:http://127.0.0.1:#{closed_port}")
    # Made first: the first profile of a run comes from a child process that
    # Open3 reads with threads, which the stub would refuse.
    exported = profile
    result = Thread.stub(:new, ->(*) { raise ThreadError, "can't alloc thread" }) { datadog.export(exported) }
    refute result
    assert_equal 1, datadog.stats[:dropped]
    assert_match(/ThreadError/, datadog.stats[:last_error])
  end

  # --- queue, shutdown, fork ------------------------------------------------------

  def test_full_queue_drops_the_oldest_and_counts_it
    target = server(status: :hang)
    pyroscope = exporter("pyroscope:#{target.url}", queue_size: 2, timeout: 5)
    pyroscope.export(profile(start: START))
    assert target.wait_for_requests(1), "the first profile is in flight"
    _, warned = capture_io { (1..4).each { |i| pyroscope.export(profile(start: START + i)) } }
    assert_equal 2, pyroscope.stats[:dropped]
    assert_equal 1, warned.lines.size, "two drops, one warning:\n#{warned}"
    assert_match(/\Asonde: the pyroscope exporter dropped its oldest queued profile in process #{Process.pid}: .*queue_size 2/,
                 warned)
    target.release
    assert pyroscope.shutdown(timeout: 5)
    assert_equal [3, 0, 2], pyroscope.stats.values_at(:exported, :failed, :dropped)
    sent = target.requests.map { |r| r.params["from"].to_i - START.to_i }
    assert_equal [0, 3, 4], sent, "the newest profiles are the ones kept"
  end

  def test_shutdown_drains_the_queue
    target = server(status: 200)
    datadog = exporter("datadog:#{target.url}", queue_size: 10)
    5.times { |i| datadog.export(profile(start: START + i)) }
    assert datadog.shutdown(timeout: 5)
    assert_equal 5, datadog.stats[:exported]
    assert_equal 5, target.requests.size
    refute(Thread.list.any? { |t| t.name == "sonde-export-datadog" }, "the thread outlived shutdown")
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 0.20-0.21x its bound (<).
  statistical def test_shutdown_gives_up_on_time_when_the_target_is_silent
    target = server(status: :hang)
    pyroscope = exporter("pyroscope:#{target.url}", timeout: 10)
    3.times { |i| pyroscope.export(profile(start: START + i)) }
    assert target.wait_for_requests(1)
    started = monotonic_now
    _, warned = capture_io { refute pyroscope.shutdown(timeout: 0.3) }
    assert_match(/\Asonde: the pyroscope exporter had not finished within 0.3 s of shutdown in process #{Process.pid}: 1 profile in flight failed, 2 queued dropped/,
                 warned)
    assert_operator monotonic_now - started, :<, 1.5
    assert_equal [0, 1, 2], pyroscope.stats.values_at(:exported, :failed, :dropped)
    refute(Thread.list.any? { |t| t.name == "sonde-export-pyroscope" }, "the thread outlived shutdown")
  end

  def test_exporter_works_in_a_forked_child
    target = server(status: 200)
    pyroscope = exporter("pyroscope:#{target.url}")
    pyroscope.export(profile(start: START))
    assert target.wait_for_requests(1)
    reader, writer = IO.pipe
    child = fork do
      reader.close
      pyroscope.export(profile(start: START + 1, tags: TAGS.merge("pid" => Process.pid.to_s)))
      drained = pyroscope.shutdown(timeout: 5)
      writer.write(Marshal.dump([drained, pyroscope.stats]))
      writer.close
      exit!(0)
    end
    writer.close
    drained, child_stats = Marshal.load(reader.read) # rubocop:disable Security/MarshalLoad -- our own child
    Process.wait(child)
    assert drained
    assert_equal [1, 0, 0], child_stats.values_at(:exported, :failed, :dropped), "the child counts its own"
    assert_includes target.requests.map { |r| r.params["name"] }.join, "pid=#{child}"
    pyroscope.export(profile(start: START + 2)) # and the parent still works
    assert pyroscope.shutdown(timeout: 5)
    assert_equal 2, pyroscope.stats[:exported]
  end

  # --- the application does not notice ----------------------------------------

  # What an exporter must not take from the application is CPU: the loop
  # below runs for MEASURE_CPU_SECONDS of its own thread's CPU time, and the
  # share of the process's CPU time that went to that thread is measured.
  # Alone it is near 1; exporters that burned CPU (or spun on the GVL) would
  # take their part of it. An earlier version counted loop iterations per
  # CPU second instead, and on this shared, nested-VM machine the speed of a
  # CPU second itself varied 2.5x between windows (ratios 0.45 to 1.18 in one
  # run), so that measure failed without any regression; the share does not
  # depend on the speed of the CPU. The pairs alternate with and without
  # exporters and the median share ratio is used.
  MEASURE_CPU_SECONDS = 0.6 # long enough for the first retry (after 0.5 s) to fall inside
  PAIRS = 5
  MIN_CPU_SHARE_RATIO = 0.8
  # export must cost the caller no more than queueing does: a median, since
  # the OS may deschedule any single call for a while on a loaded machine.
  MAX_EXPORT_SECONDS = 0.005

  # The share of the process's CPU time this thread used while it ran for
  # +cpu_seconds+ of its own CPU time.
  def cpu_loop_share(cpu_seconds)
    thread_started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
    process_started = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    deadline = thread_started + cpu_seconds
    nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
    thread_used = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - thread_started
    thread_used / (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - process_started)
  end

  # Each pair measures the loop alone, then with fresh exporters busy with a
  # silent, a failing and a down target, which are stopped before the next
  # pair so that the "alone" side really is alone.
  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 1.23-1.24x its bound (>); "export took 0.05 ms
  # (median)" 0.01-0.02x its bound (<).
  statistical def test_application_throughput_is_unaffected_by_slow_down_or_failing_targets
    silent = server(status: :hang)
    failing = server(status: 500)
    spec = "pyroscope:#{silent.url},datadog:#{failing.url},pyroscope:http://127.0.0.1:#{closed_port}"
    export_times = []
    retries = 0
    ratios = Array.new(PAIRS) do |pair|
      without = cpu_loop_share(MEASURE_CPU_SECONDS)
      troubled = Sonde::Exporters.parse(spec, service: "shop", timeout: 2)
      troubled.each do |e|
        started = monotonic_now
        e.export(profile)
        export_times << monotonic_now - started
      end
      with = cpu_loop_share(MEASURE_CPU_SECONDS)
      # The loop leaves the other threads (exporters and these in-process
      # servers) few turns on the GVL, so a request may still be on its way:
      # wait for it, outside the measured window, before stopping them.
      assert silent.wait_for_requests(pair + 1), "the silent target was not reached in pair #{pair}"
      assert failing.wait_for_requests(pair + 1), "the failing target was not reached in pair #{pair}"
      troubled.each { |e| e.shutdown(timeout: 0) }
      retries += troubled.sum { |e| e.stats[:retries] }
      with / without
    end
    median = ratios.sort[PAIRS / 2]
    assert_operator median, :>, MIN_CPU_SHARE_RATIO, "the loop's share of process CPU, with/without exporters: #{ratios.map { |r| r.round(3) }}"
    export_median = export_times.sort[export_times.size / 2]
    assert_operator export_median, :<, MAX_EXPORT_SECONDS, "export took #{(export_median * 1000).round(2)} ms (median)"
    # The loop holds the GVL most of the time, so a retry may wait for its
    # turn past the end of the pair; across all pairs some must have run.
    assert_operator retries, :>, 0, "no retry ran during the measurements"
  end
end
