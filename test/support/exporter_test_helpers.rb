# frozen_string_literal: true

require "open3"
require "socket"
require_relative "test_helper"
require_relative "http_test_server"
require "sonde/exporters"

# What the exporter tests share: a real profile to export, servers and
# exporters that teardown stops, and waits. Include it; its setup and
# teardown are the test's.
module ExporterTestHelpers
  # Small timeouts keep the failure tests quick; the code paths are the same.
  TIMEOUT = 0.3
  TAGS = { "service" => "shop", "env" => "prod", "version" => "1.2", "host" => "web-1", "pid" => "4242",
           "runtime_version" => RUBY_VERSION, "sonde_version" => Sonde::VERSION, "team.name" => "core" }.freeze
  START = Time.utc(2024, 5, 6, 7, 8, 9)
  PERIOD = 60

  # A real profile, made once by profiling a few milliseconds of work in a
  # child process (signals and sampling threads stay out of the test runner).
  def self.pprof_bytes
    @pprof_bytes ||= profile_from('p = Sonde.profile { x = 0; t = Time.now; x += 1 while Time.now - t < 0.05 }; ' \
                                  '$stdout.binmode; $stdout.write(p.pprof)')
  end

  # "endpoint" is also a label value here: its string is shared with the key
  # in the string table, and must stay "endpoint" where it is a value.
  LABELLED_SCRIPT = <<~RUBY
    #{SondeTestHelper::BURN_SCRIPT}
    Sonde.start(rate: 250)
    Sonde.with_labels(endpoint: "GET /users", tenant: "acme") { burn(0.15) }
    Sonde.with_labels(endpoint: "POST /orders", kind: "endpoint") { burn(0.15) }
    burn(0.05)
    $stdout.binmode
    $stdout.write(Sonde.stop.pprof)
  RUBY

  # A real profile with labels (two endpoints), made once the same way.
  def self.labelled_pprof_bytes
    @labelled_pprof_bytes ||= profile_from(LABELLED_SCRIPT)
  end

  # The pprof bytes a child process running script writes to its stdout.
  def self.profile_from(script)
    out, err, status = Open3.capture3(RbConfig.ruby, "-I#{SondeTestHelper::LIB}", "-rsonde", "-e", script,
                                      binmode: true)
    raise "could not make a profile: #{err}" unless status.success?

    out.b.freeze
  end

  def setup
    @servers = []
    @exporters = []
  end

  def teardown
    @exporters.each { |exporter| exporter.shutdown(timeout: 0.1) }
    @servers.each(&:stop)
  end

  def profile(start: START, tags: TAGS)
    Sonde::ExportedProfile.new(pprof: ExporterTestHelpers.pprof_bytes, start_time: start, end_time: start + PERIOD, tags: tags)
  end

  def server(status: 200)
    HttpTestServer.new(status: status).tap { |s| @servers << s }
  end

  def exporters(spec, **settings)
    Sonde::Exporters.parse(spec, service: "shop", timeout: TIMEOUT, **settings).tap { |list| @exporters.concat(list) }
  end

  def exporter(spec, **settings)
    exporters(spec, **settings).first
  end

  # A port nothing listens on: bound, then closed.
  def closed_port
    probe = TCPServer.new("127.0.0.1", 0)
    probe.addr[1]
  ensure
    probe&.close
  end

  def wait_until(timeout: 5)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield
      return false if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.01
    end
    true
  end

  def settled?(exporter, count)
    stats = exporter.stats
    stats[:exported] + stats[:failed] >= count
  end

  def assert_decodes(bytes)
    decoded = Sonde::Pprof.decode(bytes)
    assert_equal Sonde::Pprof.decode(ExporterTestHelpers.pprof_bytes).samples.size, decoded.samples.size
    assert decoded.value_index("cpu-time"), "the profile lost its sample types"
  end

  def monotonic_now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
