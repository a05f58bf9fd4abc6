# frozen_string_literal: true

require_relative "support/test_helper"
require_relative "support/exporter_test_helpers"
require "sonde/exporters"

# The exporters' own options, as users reach them: "?name=value" after an
# entry (Sonde.start's export:, SONDE_EXPORT) or the Hash form. Each option
# works end to end; each bad value is refused at Sonde.start with a message
# that names it, the value and what is accepted. The exporter registry
# takes a new exporter with one class and one line. The directory exporter
# keeps per process, so prefork workers sharing a directory keep their own
# files, and max_bytes caps the service's.
class ExportOptionsTest < Minitest::Test
  include SondeTestHelper
  include ExporterTestHelpers

  # An exporter of the test's own: it keeps what it is given, in memory.
  class MemoryExporter < Sonde::Exporters::Base
    DELIVERED = Queue.new

    def self.kind = "memory"
    def self.target_name = "NAME"
    def self.target_key = :name
    def self.option_names = []
    def self.check_target(text) = text.empty? ? raise(Sonde::Exporters::TargetError, "no name") : text
    def self.prepare_target(name) = name

    def initialize(name, settings)
      super(settings)
      @name = name
    end

    private

    def deliver(exported_profile)
      DELIVERED << [@name, exported_profile]
    end
  end

  def teardown
    super
    Sonde::Exporters::Registry.unregister(:memory)
    Sonde.stop if Sonde.running?
  end

  def test_a_new_exporter_is_one_class_and_one_registry_line
    refute_includes Sonde::Exporters::Registry.kinds, "memory"
    error = assert_raises(Sonde::ArgumentError) { Sonde::Options.new(export: "memory:box") }
    assert_match(/unknown exporter "memory"/, error.message)

    Sonde::Exporters::Registry.register(MemoryExporter) # the one line

    options = Sonde::Options.new(export: "memory:box?queue_size=2")
    assert_equal [[MemoryExporter, "box", { queue_size: 2 }]],
                 options.export_specs.map { |spec| [spec.exporter_class, spec.target, spec.options] }
    assert_match(/memory:NAME/, Sonde::Exporters.accepted, "errors list the new kind")
    shape = assert_raises(Sonde::ArgumentError) { Sonde::Options.new(export: []) }
    assert_match(/\Aexport must be one or more of dir:PATH, pyroscope:URL, datadog:URL, otlp:URL, memory:NAME,/, shape.message,
                 "the export setting's own message lists the registry's kinds")
    Sonde.start(continuous: true, export: [{ kind: :memory, name: "hash-form" }], service: "shop", rate: 200)
    burn_cpu(0.05)
    Sonde.stop
    name, exported = MemoryExporter::DELIVERED.pop(timeout: 5)
    assert_equal "hash-form", name
    profile = Sonde::Pprof.decode(exported.pprof)
    assert_includes profile.comments, "service=shop", "the encoder wrote the tags into the profile"
    assert_equal exported.tags.map { |k, v| "#{k}=#{v}" }.sort, profile.comments
  end

  # A kind is one class's: registering it again, from the same class or
  # another, is refused until it is unregistered, and a built-in kind
  # belongs to its built-in class.
  def test_a_kind_is_registered_once
    Sonde::Exporters::Registry.register(MemoryExporter)
    error = assert_raises(Sonde::ArgumentError) { Sonde::Exporters::Registry.register(MemoryExporter) }
    assert_equal "exporter kind \"memory\" is already registered (#{MemoryExporter}); unregister it before " \
                 "registering #{MemoryExporter}", error.message
    other = Class.new(MemoryExporter)
    assert_raises(Sonde::ArgumentError) { Sonde::Exporters::Registry.register(other) }
    assert_same MemoryExporter, Sonde::Exporters::Registry.fetch(:memory), "the first registration stands"

    Sonde::Exporters::Registry.unregister(:memory)
    assert_same other, Sonde::Exporters::Registry.register(other)

    impostor = Class.new(MemoryExporter) { def self.kind = "dir" }
    error = assert_raises(Sonde::ArgumentError) { Sonde::Exporters::Registry.register(impostor) }
    assert_match(/\Aexporter kind "dir" is Sonde's own \(Sonde::Exporters::Directory\)/, error.message)
    assert_same Sonde::Exporters::Directory, Sonde::Exporters::Registry.fetch("dir")
  end

  # Each exporter names its kind once, in the class: its instances, their
  # thread and their stats go by the kind its export entries name.
  def test_each_exporter_goes_by_the_kind_of_its_entries
    Dir.mktmpdir do |dir|
      entries = { "dir" => "dir:#{dir}", "pyroscope" => "pyroscope:http://127.0.0.1:9",
                  "datadog" => "datadog:http://127.0.0.1:9", "otlp" => "otlp:http://127.0.0.1:9" }
      assert_equal Sonde::Exporters::Registry.kinds.sort, entries.keys.sort, "a kind this test does not build"
      entries.each do |kind, entry|
        exporter = Sonde::Exporters.parse(entry).first
        assert_equal kind, exporter.kind
        assert_equal kind, exporter.class.kind
        assert_equal Sonde::Exporters::Base, exporter.class.instance_method(:kind).owner, "#{kind} spells its kind twice"
      end
      Sonde.start(continuous: true, export: "dir:#{dir}", rate: 100)
      kinds = Sonde.stats[:exporters].map { |stats| stats[:kind] }
      Sonde.stop
      assert_equal ["dir"], kinds
    end
  end

  def burn_cpu(seconds)
    deadline = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + seconds
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
    x
  end

  # keep=2 through Sonde.start itself: four periods (three flushes a second
  # apart, and the last at stop), two files left.
  def test_keep_given_in_the_export_entry_works_end_to_end
    Dir.mktmpdir do |dir|
      Sonde.start(continuous: true, every: 1, export: "dir:#{dir}?keep=2", service: "shop")
      assert wait_until(timeout: 15) { Sonde.stats[:flushes] >= 3 }, "the flusher did not flush three times"
      Sonde.stop
      files = Dir.children(dir).grep(/\.pprof\z/)
      assert_equal 2, files.size, files.inspect
      # Every period was written (the flushes, and the last at stop); keep removed the rest.
      assert_equal Sonde.stats[:flushes] + 1, Sonde.stats[:exporters].first[:exported]
    end
  end

  def test_sonde_export_takes_the_same_options
    options = Sonde::Options.new(environment: { "SONDE_EXPORT" => "dir:/tmp/p?keep=3&max_bytes=64M," \
                                                                  "pyroscope:http://h:4040?tenant=a&timeout=2.5" })
    assert_equal [{ keep: 3, max_bytes: 64 * 1024 * 1024 }, { tenant: "a", timeout: 2.5 }],
                 options.export_specs.map(&:options)
    error = assert_raises(Sonde::ArgumentError) { Sonde::Options.new(environment: { "SONDE_EXPORT" => "dir:x?keep=0" }) }
    assert_match(/\ASONDE_EXPORT="dir:x\?keep=0": not accepted: keep must be an Integer from 1 to 100000/, error.message)
  end

  # [entry, what the message must say]. Every one is refused by Sonde.start
  # before anything starts, naming the option, the value (secrets hidden)
  # and what is accepted.
  BAD_ENTRIES = {
    "dir:p?keep=0" => /keep must be an Integer from 1 to 100000 \(profiles this process keeps\), got 0/,
    "dir:p?keep=ten" => /keep must be an Integer from 1 to 100000 .*got "ten"/,
    "dir:p?max_bytes=12X" => /max_bytes must be a positive Integer of bytes .*got "12X"/,
    "dir:p?max_bytes=0" => /max_bytes must be a positive Integer of bytes .*got 0/,
    "pyroscope:http://h?timeout=0" => /timeout must be a number of seconds above 0 and at most 600, got 0.0/,
    "datadog:http://h?timeout=601" => /timeout must be a number of seconds above 0 and at most 600, got 601.0/,
    "datadog:http://h?queue_size=0" => /queue_size must be an Integer from 1 to 1000 .*got 0/,
    "dir:p?max_attempts=11" => /max_attempts must be an Integer from 1 to 10 .*got 11/,
    "pyroscope:http://h?tenant=" => /tenant must be a non-empty String .*got ""/,
    "pyroscope:http://h?token=" => /token must be a non-empty String .*got \(hidden, String\)/,
    "pyroscope:http://h?basic_auth=s3cret" => /basic_auth must be "user:password".*got \(hidden, String\)/,
    "pyroscope:http://h?keep=3" => /unknown option "keep" for pyroscope: its options are timeout, token, basic_auth, tenant/,
    "datadog:http://h?tenant=a" => /unknown option "tenant" for datadog: its options are timeout, queue_size/,
    "dir:p?keep=1&keep=2" => /keep is given twice/,
    "dir:p?keep" => /its options must be name=value&name=value/,
  }.freeze

  def test_bad_options_are_refused_at_start_with_what_is_accepted
    BAD_ENTRIES.each do |entry, reason|
      error = assert_raises(Sonde::ArgumentError, entry) { Sonde.start(export: entry) }
      shown = entry.sub(/(token|basic_auth)=[^&]*/, '\1=***')
      assert_match(/\Aexport: #{Regexp.escape(shown.inspect)} is not accepted: /, error.message, entry)
      assert_match reason, error.message, entry
      assert_match(/; accepted: one or more of dir:PATH, pyroscope:URL, datadog:URL/, error.message, entry)
      refute_match(/s3cret/, error.message, "a secret reached the message")
      refute Sonde.running?
    end
    error = assert_raises(Sonde::ArgumentError) { Sonde.start(export: [{ kind: :pyroscope, url: "http://h", token: 7 }]) }
    assert_match(/\Aexport: \{.*pyroscope.*"\*\*\*"\} is not accepted: token must be .*got \(hidden, Integer\)/,
                 error.message)
    error = assert_raises(Sonde::ArgumentError) { Sonde.start(export: [{ kind: :zipkin, url: "http://h" }]) }
    assert_match(/kind: must name an exporter \(dir, pyroscope, datadog, otlp\)/, error.message)
    error = assert_raises(Sonde::ArgumentError) { Sonde.start(export: [{ kind: :dir, url: "x" }]) }
    assert_match(/unknown option "url" for dir|path: must be a String/, error.message)
  end

  # --- the HTTP options, through the entry -------------------------------------

  def test_max_attempts_from_the_entry_bounds_the_tries
    target = server(status: 500)
    failing = exporter("datadog:#{target.url}?max_attempts=2")
    failing.export(profile)
    assert wait_until { settled?(failing, 1) }
    assert_equal [0, 1, 1], failing.stats.values_at(:exported, :failed, :retries)
    assert_equal 2, target.requests.size
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 1.02-1.61x its bound (>=); "the entry's timeout (0.4
  # s) lost to the default" 0.16-0.26x its bound (<).
  statistical def test_timeout_from_the_entry_is_the_one_used
    target = server(status: :hang)
    silent = exporter("pyroscope:#{target.url}?timeout=0.4&max_attempts=1", timeout: 5)
    started = monotonic_now
    silent.export(profile)
    assert wait_until { settled?(silent, 1) }
    elapsed = monotonic_now - started
    assert_match(/ReadTimeout/, silent.stats[:last_error])
    assert_operator elapsed, :>=, 0.4
    assert_operator elapsed, :<, 2.5, "the entry's timeout (0.4 s) lost to the default"
  end

  def test_queue_size_from_the_entry_bounds_the_queue
    target = server(status: :hang)
    slow = exporter("pyroscope:#{target.url}?queue_size=1&timeout=5")
    slow.export(profile(start: START))
    assert target.wait_for_requests(1)
    3.times { |i| slow.export(profile(start: START + i + 1)) }
    assert_equal 2, slow.stats[:dropped], "a queue of one keeps the newest only"
    target.release
    assert slow.shutdown(timeout: 5)
  end

  # --- the directory exporter in a prefork fleet ---------------------------------

  WRITERS = 4
  PROFILES_EACH = 6

  # Forked writers share one directory and one service, each writing more
  # profiles than it keeps, all at once.
  def write_from_forked_writers(dir, entry)
    ready_reader, ready_writer = IO.pipe
    pids = Array.new(WRITERS) do
      fork do
        ready_writer.close
        writer = Sonde::Exporters.parse(entry, service: "web").first
        ready_reader.read(1) # all start together
        PROFILES_EACH.times { |i| writer.export(profile(start: START + i)) && writer.shutdown(timeout: 5) }
        exit!(writer.stats[:exported] == PROFILES_EACH ? 0 : 1)
      end
    end
    ready_reader.close
    ready_writer.write("x" * WRITERS)
    ready_writer.close
    pids.each { |pid| assert Process.wait2(pid).last.success?, "writer #{pid} did not export everything" }
    pids
  end

  def files_by_pid(dir)
    Dir.children(dir).grep(/\Aweb-(\d+)-.*\.pprof\z/).group_by { |name| Integer(name[/\Aweb-(\d+)-/, 1]) }
  end

  def test_prefork_writers_keep_their_own_files
    Dir.mktmpdir do |dir|
      pids = write_from_forked_writers(dir, "dir:#{dir}?keep=3")
      by_pid = files_by_pid(dir)
      assert_equal pids.sort, by_pid.keys.sort, "a writer lost all its files to another"
      stamp = ->(t) { t.utc.strftime("%Y%m%dT%H%M%SZ") }
      pids.each do |pid|
        newest = (PROFILES_EACH - 3...PROFILES_EACH).map { |i| "web-#{pid}-#{stamp[START + i]}.pprof" }
        assert_equal newest.sort, by_pid.fetch(pid).sort, "writer #{pid} keeps its own newest 3"
      end
    end
  end

  # max_bytes is the service's cap, whoever wrote the files: the oldest go
  # first. Writers that remove at the same moment may each take one more
  # file than needed, no more.
  def test_max_bytes_caps_the_whole_service
    size = ExporterTestHelpers.pprof_bytes.bytesize
    Dir.mktmpdir do |dir|
      cap = size * 7
      File.write(File.join(dir, "web-1-20200101T000000Z.pprof"), "x" * size) # an exited worker's, oldest
      File.utime(Time.now - 3600, Time.now - 3600, File.join(dir, "web-1-20200101T000000Z.pprof"))
      write_from_forked_writers(dir, "dir:#{dir}?keep=5&max_bytes=#{cap}")
      total = Dir.glob(File.join(dir, "web-*.pprof")).sum { |path| File.size(path) }
      assert_operator total, :<=, cap, "the service's files take #{total} bytes, over max_bytes=#{cap}"
      assert_operator total, :>, cap - WRITERS * size, "max_bytes removed more than it had to"
      refute File.exist?(File.join(dir, "web-1-20200101T000000Z.pprof")), "the oldest file goes first"
    end
  end

  def test_max_bytes_never_removes_the_file_just_written
    size = ExporterTestHelpers.pprof_bytes.bytesize
    Dir.mktmpdir do |dir|
      writer = exporter("dir:#{dir}?max_bytes=#{size / 2}")
      2.times { |i| writer.export(profile(start: START + i)) }
      assert writer.shutdown(timeout: 5)
      assert_equal ["shop-#{Process.pid}-#{(START + 1).utc.strftime("%Y%m%dT%H%M%SZ")}.pprof"], Dir.children(dir)
    end
  end
end
