# frozen_string_literal: true

require_relative "support/test_helper"
require_relative "support/command_test_helper"
require "stringio"
require "sonde/convert"
require "sonde/cli/convert_command"
require "support/pprof_fixture"
require "support/firefox_format"
require "support/node_deps"

# `sonde convert --to firefox`: Firefox Profiler's processed format (version
# 48), checked against the format's description (support/firefox_format.rb),
# against a small profile whose every moment is known, and against a
# workload that knows when its threads ran.
class FirefoxExportTest < Minitest::Test
  MS = 1_000_000
  T0 = 1_700_000_000_000_000_000

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
  end

  # main (1): running, running, a GC, waiting for the GVL, asleep twice;
  # "GET /a" then "GET /b", then no endpoint. worker (2): blocked, then
  # running, all of it in job "Mailer". Samples are out of order, and one
  # has no moment.
  def self.fixture
    f = PprofFixture::Builder.new
    %w[cpu-time cpu-samples wall-time wall-samples].zip(%w[nanoseconds count nanoseconds count])
                                                   .each { |type, unit| f.sample_type(type, unit) }
    f.field("time_nanos: #{T0}")
    f.field("duration_nanos: #{100 * MS}")
    f.field("period_type { type: #{f.string("wall-time")} unit: #{f.string("nanoseconds")} }")
    f.field("period: #{10 * MS}")
    main = f.frame("main", "app.rb", line: 2, start_line: 1)
    work = f.frame("work", "app.rb", line: 11, start_line: 10)
    helper = f.frame("helper", "lib/helper.rb", line: 6, start_line: 5)
    gc = f.frame("Garbage Collection", "", line: 0)
    sleeping = f.frame("Kernel#sleep", "", line: 0)
    read = f.frame("IO#read", "", line: 0)
    recurse = f.frame("recurse", "app.rb", line: 21, start_line: 20)
    at = ->(ms) { { "end_timestamp_ns" => T0 + ms * MS } }
    t1 = ->(ms, state, more = {}) { { "thread id" => 1, "thread name" => "main", "state" => state }.merge(at[ms], more) }
    t2 = ->(ms, state) { { "thread id" => 2, "thread name" => "worker", "state" => state, "job" => "Mailer" }.merge(at[ms]) }
    a = { "endpoint" => "GET /a" }
    b = { "endpoint" => "GET /b" }
    f.sample([helper, work, main], [0, 0, 10 * MS, 1], t1.call(30, "running", a))
    f.sample([work, main], [0, 0, 10 * MS, 1], t1.call(20, "running", a))
    f.sample([helper, work, main], [5 * MS, 1, 0, 0], t1.call(15, "running", a))
    f.sample([work, main], [4 * MS, 1, 0, 0], t1.call(25, "running", a))
    f.sample([read, main], [0, 0, 25 * MS, 1], t2.call(25, "blocked"))
    f.sample([gc], [0, 0, 3 * MS, 0], t1.call(31, "gc", "gc type" => "minor", "gc reason" => "newobj"))
    f.sample([work, main], [0, 0, 9 * MS, 1], t1.call(40, "waiting for gvl", b))
    f.sample([recurse, recurse, main], [0, 0, 10 * MS, 1], t2.call(35, "running"))
    f.sample([recurse, recurse, main], [8 * MS, 1, 0, 0], t2.call(35, "running"))
    f.sample([sleeping, main], [0, 0, 10 * MS, 1], t1.call(50, "sleeping", b))
    f.sample([sleeping, main], [0, 0, 10 * MS, 1], t1.call(60, "sleeping"))
    f.sample([work, main], [0, 0, 500 * MS, 50], "thread id" => 1, "thread name" => "main", "state" => "running")
    f
  end

  def profile
    @profile ||= Sonde::Pprof.decode(self.class.fixture.encode)
  end

  def export(source = profile)
    JSON.parse(Sonde::Convert.new(source, to: :firefox, name: "app.pprof").write(StringIO.new).string)
  end

  def thread(json, name)
    json["threads"].find { |t| t["name"] == name } or flunk "no thread #{name}"
  end

  # Frame names of each sample's stack, root first, through the prefix column.
  def stacks(thread)
    strings = thread["stringArray"]
    st, fr, fn = thread.values_at("stackTable", "frameTable", "funcTable")
    thread["samples"]["stack"].map do |stack|
      names = []
      while stack
        names.unshift(strings[fn["name"][fr["func"][st["frame"][stack]]]])
        stack = st["prefix"][stack]
      end
      names
    end
  end

  # Each sample's category, and subcategory but the generic one.
  def category_names(json, thread)
    categories = json["meta"]["categories"]
    st = thread["stackTable"]
    thread["samples"]["stack"].map do |stack|
      category = categories[st["category"][stack]]
      sub = st["subcategory"][stack]
      sub.zero? ? category["name"] : "#{category["name"]}: #{category["subcategories"][sub]}"
    end
  end

  def markers(thread)
    m = thread["markers"]
    Array.new(m["length"]) do |i|
      [thread["stringArray"][m["name"][i]], m["startTime"][i], m["endTime"][i], m["data"][i]]
    end
  end

  def test_the_file_is_what_the_format_describes
    json = export
    assert_empty FirefoxFormat.problems(json)
    meta = json["meta"]
    assert_equal [48, 10.0, T0 / 1e6, 0, 100.0], meta.values_at("preprocessedProfileVersion", "interval", "startTime",
                                                                  "profilingStartTime", "profilingEndTime")
    assert_equal({ "time" => "ms", "eventDelay" => "ms", "threadCPUDelta" => "ns" }, meta["sampleUnits"])
    assert_equal [["Other", ["Other"]], ["Running", ["Other"]], ["Waiting for GVL", ["Other"]],
                  ["Idle", %w[Other Sleeping Blocked]], ["GC", ["Other"]]],
                 meta["categories"].map { |c| c.values_at("name", "subcategories") }
  end

  def test_one_thread_per_sonde_thread_its_wall_samples_in_time_order
    json = export
    assert_equal [["main", 1, true, "0", "default"], ["worker", 2, false, "0", "default"]],
                 json["threads"].map { |t| t.values_at("name", "tid", "isMainThread", "pid", "processType") }
    main = thread(json, "main")
    samples = main["samples"]
    assert_equal [20.0, 30.0, 31.0, 40.0, 50.0, 60.0], samples["time"], "ms after the profile's start; the untimed sample left out"
    assert_equal [10.0, 10.0, 3.0, 9.0, 10.0, 10.0], samples["weight"]
    assert_equal "tracing-ms", samples["weightType"]
    assert_equal [5 * MS, 4 * MS, 0, 0, 0, 0], samples["threadCPUDelta"], "each CPU sample to the next wall sample"
    assert_equal [%w[main work], %w[main work helper], ["Garbage Collection"], %w[main work], %w[main Kernel#sleep],
                  %w[main Kernel#sleep]], stacks(main)
    assert_equal ["Running", "Running", "GC", "Waiting for GVL", "Idle: Sleeping", "Idle: Sleeping"],
                 category_names(json, main)
    assert_equal ["Idle: Blocked", "Running"], category_names(json, thread(json, "worker"))
    worker = thread(json, "worker")
    assert_equal [[25.0, 35.0], [0, 8 * MS]], worker["samples"].values_at("time", "threadCPUDelta")
    assert_equal [%w[main IO#read], %w[main recurse recurse]], stacks(worker)
  end

  def test_stacks_frames_and_functions_are_each_written_once
    main = thread(export, "main")
    st = main["stackTable"]
    assert_equal main["samples"]["stack"][0], st["prefix"][main["samples"]["stack"][1]], "main;work is main;work;helper's prefix"
    assert_equal st["length"], st["frame"].zip(st["prefix"]).uniq.size, "no stack twice"
    fr = main["frameTable"]
    assert_equal fr["length"], fr["func"].zip(fr["line"], fr["category"]).uniq.size, "no frame twice"
    fn = main["funcTable"]
    names = fn["name"].map { |i| main["stringArray"][i] }
    assert_equal ["main", "work", "helper", "Garbage Collection", "Kernel#sleep"], names
    assert_equal main["stringArray"].size, main["stringArray"].uniq.size
    work = names.index("work")
    assert_equal ["app.rb", 10, true], [main["stringArray"][fn["fileName"][work]], fn["lineNumber"][work], fn["isJS"][work]]
    sleep_func = names.index("Kernel#sleep")
    assert_equal [nil, nil, false], [fn["fileName"][sleep_func], fn["lineNumber"][sleep_func], fn["isJS"][sleep_func]]
    assert_includes fr["line"].each_index.select { |i| fr["func"][i] == work }.map { |i| fr["line"][i] }, 11
  end

  # By start, then end: the GC from its end less its wall time; a state's
  # run merged; a label's run from where its first part starts (GC parts
  # leave it whole).
  def test_markers_gc_states_and_label_values
    json = export
    assert_equal [
      ["GET /a", 10.0, 30.0, { "type" => "Label", "label" => "endpoint", "value" => "GET /a" }],
      ["GC", 28.0, 31.0, { "type" => "GC", "gcType" => "minor", "gcReason" => "newobj" }],
      ["waiting for gvl", 31.0, 40.0, { "type" => "ThreadState", "state" => "waiting for gvl" }],
      ["GET /b", 31.0, 50.0, { "type" => "Label", "label" => "endpoint", "value" => "GET /b" }],
      ["sleeping", 40.0, 60.0, { "type" => "ThreadState", "state" => "sleeping" }]
    ], markers(thread(json, "main"))
    assert_equal [
      ["blocked", 0.0, 25.0, { "type" => "ThreadState", "state" => "blocked" }],
      ["Mailer", 25.0, 35.0, { "type" => "Label", "label" => "job", "value" => "Mailer" }]
    ], markers(thread(json, "worker")), "a run that starts blocked starts where that part ends"
    assert_equal [1], thread(json, "main")["markers"]["phase"].uniq, "intervals"
    categories = json["meta"]["categories"].map { |c| c["name"] }
    assert_equal ["Other", "GC", "Waiting for GVL", "Other", "Idle"],
                 thread(json, "main")["markers"]["category"].map { |i| categories[i] }
    schemas = json["meta"]["markerSchema"].map { |schema| schema["name"] }
    assert_equal %w[GC ThreadState Label], schemas
  end

  def test_the_same_profile_gives_the_same_file
    first = Sonde::Convert.new(profile, to: :firefox).write(+"")
    assert_equal first, Sonde::Convert.new(Sonde::Pprof.decode(self.class.fixture.encode), to: :firefox).write(+"")
  end

  def test_a_profile_without_a_timeline_is_refused
    f = PprofFixture::Builder.new
    f.sample_type("cpu-time", "nanoseconds")
    f.sample([f.frame("work", "app.rb", line: 3)], [5], "thread id" => 1)
    error = assert_raises(Sonde::Convert::ProfileError) do
      Sonde::Convert.new(Sonde::Pprof.decode(f.encode), to: :firefox)
    end
    assert error.message.start_with?("the profile has no timeline (no sample carries end_timestamp_ns): it was " \
                                     "recorded with --no-timeline, timeline: false or in continuous mode; record it " \
                                     "with sonde record or Sonde.start"), error.message
    assert_match(/timeline: true \(SONDE_TIMELINE=1\)\z/, error.message)
  end

  def test_options_firefox_does_not_take
    error = assert_raises(Sonde::ArgumentError) { Sonde::Convert.new(profile, to: :firefox, sample: "cpu") }
    assert_match(/sample: firefox takes no sample type/, error.message)
    error = assert_raises(Sonde::ArgumentError) { Sonde::Convert.new(profile, to: :firefox, label: "endpoint") }
    assert_match(/only collapsed stacks lead by a label/, error.message)
  end
end

class FirefoxExportCommandTest < Minitest::Test
  include CommandTestHelper

  COMMAND = Sonde::CLI::ConvertCommand
  COMMAND_NAME = "convert"

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
    @dir = Dir.mktmpdir("sonde-firefox")
    @file = File.join(@dir, "app.pprof")
    File.binwrite(@file, FirefoxExportTest.fixture.gzip)
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_to_file_and_to_stdout
    output = File.join(@dir, "app.json")
    code, out, err = run_command(@file, "--to", "firefox", "-o", output)
    assert_equal [0, "", "sonde: wrote #{output}\n"], [code, out, err]
    json = JSON.parse(File.read(output))
    assert_equal %w[main worker], json["threads"].map { |t| t["name"] }
    assert_equal "app.pprof", json["threads"][0]["processName"]
    code, out, = run_command(@file, "--to", "firefox")
    assert_equal [0, File.read(output)], [code, out]
  end

  def test_a_profile_without_a_timeline_exits_1
    f = PprofFixture::Builder.new
    f.sample_type("cpu-time", "nanoseconds")
    f.sample([f.frame("work", "app.rb", line: 3)], [5], "thread id" => 1)
    File.binwrite(@file, f.gzip)
    code, out, err = run_command(@file, "--to", "firefox")
    assert_equal [1, ""], [code, out]
    assert_one_line_error(err, /\Asonde convert: #{Regexp.escape(@file)}: the profile has no timeline .*--no-timeline/)
  end

  def test_usage_errors
    code, _, err = run_command(@file, "--to", "firefox", "--sample", "wall")
    assert_equal 2, code
    assert_one_line_error(err, /--sample: firefox takes no sample type/)
    code, _, err = run_command(@file, "--to", "gecko")
    assert_equal 2, code
    assert_one_line_error(err, /--to: "gecko" is not accepted \(expected collapsed, speedscope or firefox\)/)
  end
end

# The Firefox Profiler's own code reads the file: its command line
# (@firefox-devtools/profiler-cli, pinned by script/test-node-deps) loads it
# through the profiler's loader and upgrader, counts each thread's CPU from
# threadCPUDelta, sums the call tree in wall ms (leaving idle samples out
# unless asked) and lists the markers.
class FirefoxProfilerLoadTest < Minitest::Test
  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
    NodeDeps.skip_if_they_ran_on_another_ruby(self)
    skip "Node.js is not installed (apt-get install nodejs npm)" unless system("node --version > /dev/null 2>&1")
    @cli = File.join(NodeDeps.install, "@firefox-devtools", "profiler-cli", "dist", "profiler-cli.js")
    # Short: the session's socket lives in it (108 bytes at most).
    @dir = Dir.mktmpdir("sonde-pq")
    @file = File.join(@dir, "app.json")
    File.write(@file, Sonde::Convert.new(Sonde::Pprof.decode(FirefoxExportTest.fixture.encode), to: :firefox,
                                                                                               name: "app.pprof")
                                   .write(+"").to_s)
  end

  def teardown
    return unless @dir

    profiler_cli("stop", json: false) if @loaded # its daemon
    FileUtils.rm_rf(@dir)
  end

  def profiler_cli(*args, json: true)
    args << "--json" if json
    stdout, stderr, status = Open3.capture3({ "PROFILER_CLI_SESSION_DIR" => @dir }, "node", @cli, *args)
    assert status.success?, "profiler-cli #{args.join(" ")} failed:\n#{stdout}#{stderr}"
    json ? JSON.parse(stdout) : stdout
  end

  def test_the_profilers_own_loader_reads_it
    profiler_cli("load", @file, json: false)
    @loaded = true
    threads = profiler_cli("thread", "list")["threads"].to_h { |t| [t["name"], t] }
    assert_equal %w[main worker], threads.keys.sort
    assert_equal [2, "app.pprof", "0"], threads["worker"].values_at("tid", "processName", "pid")
    # It reads each delta as the CPU since the sample before: a thread's
    # first one (main's 5 ms before 20 ms) is not counted.
    assert_equal({ "main" => 4.0, "worker" => 8.0 }, threads.transform_values { |t| t["cpuMs"] })

    main = threads["main"]["threadHandle"]
    tree = profiler_cli("thread", "samples-top-down", "--thread", main, "--include-idle")
    assert_equal "tracing-ms", tree["weightType"]
    root = tree["regularCallTree"]
    assert_equal 52, root["totalSamples"], "wall ms: 10 + 10 + 3 + 9 + 10 + 10"
    work = root["children"].find { |node| node["name"] == "main" }["children"].find { |node| node["name"] == "work" }
    assert_equal [29, 19], work.values_at("totalSamples", "selfSamples")
    active = profiler_cli("thread", "samples-top-down", "--thread", main)["regularCallTree"]
    assert_equal 32, active["totalSamples"], "the 20 ms asleep are idle"

    markers = profiler_cli("thread", "markers", "--thread", main)
    assert_equal ["GC", "GET /a", "GET /b", "sleeping", "waiting for gvl"], markers["byType"].map { |m| m["markerName"] }.sort
    gc = markers["byType"].find { |m| m["markerName"] == "GC" }["topMarkers"].first
    assert_equal [28, 3], gc.values_at("start", "duration")
  end
end

# Against a workload that knows its truth: two threads taking turns burning
# 0.5 s each (test/workloads/taking_turns.rb prints each turn's edges).
# Through `sonde convert --to firefox`, each thread's samples in its burner
# fall within its own turns, within 20 ms of their edges.
class FirefoxTimelineWorkloadTest < Minitest::Test
  include SondeTestHelper

  EDGE_MS = 20.0
  BURNERS = { "A" => "Object#burn_in_a", "B" => "Object#burn_in_b" }.freeze

  def setup
    skip "Sonde cannot run here: #{Sonde.unsupported_reason}" unless Sonde.supported?
    @dir = Dir.mktmpdir("sonde-firefox-turns")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def convert(pprof)
    json = File.join(@dir, "turns.json")
    _stdout, stderr, status = run_sonde("convert", pprof, "--to", "firefox", "-o", json)
    assert_succeeded status, stderr
    JSON.parse(File.read(json))
  end

  def func_names(thread, stack)
    st, fr, fn = thread.values_at("stackTable", "frameTable", "funcTable")
    names = []
    while stack
      names << thread["stringArray"][fn["name"][fr["func"][st["frame"][stack]]]]
      stack = st["prefix"][stack]
    end
    names
  end

  def gc_samples(profile)
    wall = profile.value_index("wall-time")
    profile.samples.select do |sample|
      sample.labels["state"] == "gc" && sample.labels.key?("end_timestamp_ns") && sample.values[wall].positive?
    end
  end

  # [start, end, data] of every GC marker of every thread.
  def gc_markers(json)
    json["threads"].flat_map do |thread|
      m = thread["markers"]
      m["name"].each_index.select { |i| thread["stringArray"][m["name"][i]] == "GC" }
               .map { |i| [m["startTime"][i], m["endTime"][i], m["data"][i]] }
    end
  end

  def test_each_threads_burning_samples_fall_within_its_turns
    profile, facts, pprof = taking_turns_recording
    start_ns = profile.time_nanos
    json = convert(pprof)
    assert_empty FirefoxFormat.problems(json)
    assert_equal gc_samples(profile).size, gc_markers(json).size, "a GC marker per GC sample"
    to_ms = ->(ns) { (ns - start_ns) / 1e6 }
    contended = to_ms.call(facts["contended"][0])
    BURNERS.each do |name, burner|
      thread = json["threads"].find { |t| t["name"] == name } or flunk "no thread #{name}"
      turns = facts["turns"].select { |turn| turn[0] == name }.map { |_, from, to| (to_ms.call(from)..to_ms.call(to)) }
      samples = thread["samples"]
      burning = samples["time"].each_index.select do |i|
        samples["time"][i] < contended && func_names(thread, samples["stack"][i]).include?(burner)
      end
      refute_empty burning, "#{name}'s samples in #{burner}"
      outside = burning.map { |i| samples["time"][i] }.reject do |at|
        turns.any? { |turn| at >= turn.begin - EDGE_MS && at <= turn.end + EDGE_MS }
      end
      assert_empty outside, "#{name}'s #{burner} samples (ms) outside its turns #{turns}"
      # The thread's CPU is in its samples' CPU deltas: about the 1.5 s it burned.
      cpu_ms = samples["threadCPUDelta"].sum / 1e6
      burned_ms = facts["turns"].select { |turn| turn[0] == name }.sum { |turn| turn[3] } / 1e6
      assert_operator cpu_ms, :>=, 0.8 * burned_ms, "#{name}'s CPU in threadCPUDelta"
    end
  end

  # A program that collects garbage: each GC sample is a GC marker on its
  # thread, from its end less its wall time.
  def test_gc_samples_are_gc_markers
    pprof = File.join(@dir, "gc.pprof")
    script = File.join(@dir, "gc.rb")
    File.write(script, <<~RUBY)
      require "sonde"
      Sonde.start
      Thread.new { 60.times { Array.new(20_000) { "x" * 20 }; GC.start if (_1 % 6).zero? } }.join
      File.binwrite(#{pprof.inspect}, Sonde.stop.pprof)
    RUBY
    _stdout, stderr, status = run_ruby(script)
    assert_succeeded status, stderr
    profile = Sonde::Pprof.read(pprof)
    wall = profile.value_index("wall-time")
    gc = gc_samples(profile)
    skip "no GC sample in the profile" if gc.empty?
    json = convert(pprof)
    assert_empty FirefoxFormat.problems(json)
    markers = gc_markers(json)
    expected = gc.map do |sample|
      at = (sample.labels["end_timestamp_ns"] - profile.time_nanos) / 1e6
      [at - sample.values[wall] / 1e6, at]
    end
    assert_equal expected.size, markers.size
    expected.sort.zip(markers.sort_by { |start, stop, _| [start, stop] }).each do |(start, stop), (m_start, m_stop, data)|
      assert_in_delta start, m_start, 1e-6
      assert_in_delta stop, m_stop, 1e-6
      assert_equal "GC", data["type"]
      assert_includes %w[minor major], data["gcType"]
    end
  end
end

# Against what Vernier writes (a Ruby 3.3+ profiler whose output is this
# format, version 48 too): Vernier, installed by `rake bench:peers` into
# tmp/peers/ruby-3.3, profiles a small program of two threads on Ruby 3.3
# (script/ruby 3.3) at test time, and its file's shape is compared with
# ours: the same top-level keys, meta fields, per-thread fields, tables and
# columns, but for the differences listed here (docs/timeline.md says why).
# Nothing of Vernier's is kept: its output lives in a temporary folder.
class FirefoxVernierShapeTest < Minitest::Test
  include SondeTestHelper

  CHROOT = ENV.fetch("SONDE_RUBY33_CHROOT", "/var/cache/sonde/trixie-ruby33")
  PEERS = File.join(ROOT, "tmp", "peers", "ruby-3.3")
  PROGRAM = <<~RUBY
    require "vernier"
    def spin(seconds)
      stop = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop
    end
    Vernier.profile(out: ARGV[0]) do
      a = Thread.new { Thread.current.name = "A"; 2.times { spin(0.05); sleep 0.05 } }
      b = Thread.new { Thread.current.name = "B"; 2.times { sleep 0.05; spin(0.05) } }
      [a, b].each(&:join)
      GC.start
    end
  RUBY
  # meta: Vernier's own metadata and thread visibility; our recording's
  # bounds.
  VERNIER_ONLY_META = %w[extra initialVisibleThreads vernierUserMetadata].freeze
  SONDE_ONLY_META = %w[endTime profilingEndTime profilingStartTime].freeze
  # Thread: the process's type (the format's type has it; Vernier leaves it
  # out) and name.
  SONDE_ONLY_THREAD = %w[processName processType].freeze
  # samples: each sample's CPU.
  SONDE_ONLY_COLUMNS = { "samples" => %w[threadCPUDelta] }.freeze
  TABLES = %w[samples stackTable frameTable funcTable markers resourceTable].freeze

  def setup
    skip "script/ruby 3.3 needs root" unless Process.uid.zero?
    skip "no Ruby 3.3 chroot at #{CHROOT} (script/ruby 3.3 builds it)" unless File.directory?(CHROOT)
    skip "Vernier is not installed for Ruby 3.3 (ruby bench/support/install_peers.rb --rubies 3.3 --peers vernier)" if Dir[File.join(PEERS, "gems", "vernier-*")].empty?
    skip "protoc is not installed" unless PprofFixture.protoc?
    FileUtils.mkdir_p(File.join(ROOT, "tmp"))
    @dir = Dir.mktmpdir("sonde-vernier", File.join(ROOT, "tmp")) # inside the project: the chroot sees it
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def vernier_output
    program = File.join(@dir, "two_threads.rb")
    out = File.join(@dir, "vernier.json")
    File.write(program, PROGRAM)
    _stdout, stderr, status = Open3.capture3(File.join(ROOT, "script", "ruby"), "3.3", "env", "GEM_HOME=#{PEERS}",
                                             "GEM_PATH=#{PEERS}", "ruby", program, out, chdir: ROOT)
    assert_succeeded status, stderr
    JSON.parse(File.read(out))
  end

  def test_the_same_shape_as_vernier_writes
    vernier = vernier_output
    ours = JSON.parse(Sonde::Convert.new(Sonde::Pprof.decode(FirefoxExportTest.fixture.encode), to: :firefox)
                                    .write(+"").to_s)
    assert_equal vernier.keys.sort, ours.keys.sort
    assert_equal [48, 48], [vernier, ours].map { |file| file["meta"]["preprocessedProfileVersion"] }
    assert_equal VERNIER_ONLY_META, (vernier["meta"].keys - ours["meta"].keys).sort
    assert_equal SONDE_ONLY_META, (ours["meta"].keys - vernier["meta"].keys).sort
    assert_equal vernier["meta"]["sampleUnits"].keys.sort, ours["meta"]["sampleUnits"].keys.sort
    categories = [vernier, ours].flat_map { |file| file["meta"]["categories"] }
    assert_equal [%w[color name subcategories]], categories.map { |category| category.keys.sort }.uniq
    [vernier, ours].each do |file|
      file["meta"]["markerSchema"].each do |schema|
        assert_empty schema.keys - %w[name display data tooltipLabel tableLabel chartLabel], schema["name"]
      end
    end

    theirs = vernier["threads"].find { |thread| thread["name"] == "A" } or flunk "Vernier wrote no thread A"
    ours_thread = ours["threads"].first
    assert_equal [], theirs.keys - ours_thread.keys
    assert_equal SONDE_ONLY_THREAD, (ours_thread.keys - theirs.keys).sort
    TABLES.each do |table|
      assert_equal theirs[table].keys.sort, (ours_thread[table].keys - SONDE_ONLY_COLUMNS.fetch(table, [])).sort, table
    end
    # Vernier writes an empty object for nativeSymbols; ours has the table's columns.
    assert_equal({}, theirs["nativeSymbols"])
    assert_empty FirefoxFormat.problems(ours)
  end
end
