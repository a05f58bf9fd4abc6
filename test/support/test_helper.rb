# frozen_string_literal: true

require "minitest/autorun"
require "json"
require "open3"
require "rbconfig"
require "tmpdir"
require "sonde"
require "sonde/pprof"
require_relative "statistical"
require_relative "taking_turns"

# Helpers shared by the Ruby tests. Profiled workloads run in their own
# process: signal handlers, threads and forks stay out of the test runner.
module SondeTestHelper
  ROOT = File.expand_path("../..", __dir__)
  LIB = File.join(ROOT, "lib")
  WORKLOADS = File.join(ROOT, "test", "workloads")
  EXE = File.join(ROOT, "exe", "sonde")
  # For child scripts: burn(seconds) spins until the calling thread has
  # used that much CPU (its own clock: the workload's truth).
  BURN_SCRIPT = <<~RUBY
    def burn(seconds)
      started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      x = 0
      x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started < seconds
      x
    end
  RUBY

  # A loopback port free now (bound, then closed), for a server a test starts.
  def free_port
    require "socket"
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # Runs a Ruby script with Sonde on the load path; returns [stdout, stderr, status].
  # The child starts without RubyGems unless it loads a gem (gems: true):
  # `ruby -e 1` takes about 55 ms of CPU with RubyGems and 10 without, and
  # the suite starts hundreds of children. Sonde needs no RubyGems
  # (StartupTest checks it loads and records without them); Ruby's default
  # libraries (json, zlib, socket) load either way.
  def run_ruby(*args, env: {}, chdir: nil, gems: false)
    options = chdir ? { chdir: chdir } : {}
    Open3.capture3(env, RbConfig.ruby, *("--disable-gems" unless gems), "-I#{LIB}", *args, **options)
  end

  # A child's exit status and stderr: a child killed by a signal, or one that
  # exits non-zero without a word, still says how it ended.
  def assert_succeeded(status, stderr)
    assert status.success?, "the child process failed (#{status.inspect}):\n#{stderr}"
  end

  # Runs test/workloads/NAME.rb, which profiles itself and prints one JSON
  # line of facts about what it really did; returns that Hash.
  def run_workload(name, *args, env: {}, gems: false)
    stdout, stderr, status = run_ruby(File.join(WORKLOADS, "#{name}.rb"), *args, env: env, gems: gems)
    assert status.success?, "workload #{name} failed (#{status.inspect}):\n#{stderr}"
    JSON.parse(stdout.lines.last)
  end

  # test/workloads/taking_turns.rb's recording with the default options,
  # shared by every test of this process that reads it (TakingTurns).
  def taking_turns_recording
    TakingTurns.default_recording(method(:run_workload))
  end

  # Ruby 3.1/3.2 with YJIT: passes run only at rare safe points.
  def yjit_on_ruby31?
    defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? && RUBY_VERSION < "3.3"
  end

  def run_sonde(*args, env: {}, chdir: nil, gems: false)
    run_ruby(EXE, *args, env: env, chdir: chdir, gems: gems)
  end

  # Every profile the suite writes goes through `go tool pprof` too, when Go
  # is installed (CI installs it): it must read it without complaint.
  def assert_go_pprof_reads(path)
    return unless go_available?

    %w[cpu-time wall-time].each do |index|
      stdout, stderr, status = Open3.capture3("go", "tool", "pprof", "-top", "-sample_index=#{index}", path)
      assert status.success?, "go tool pprof failed on #{path} (#{index}):\n#{stderr}"
      refute_match(/malformed|warning|error/i, stderr.lines.reject { |l| l.include?("Main binary filename") }.join,
                   "go tool pprof complained about #{path}")
      assert_match(/Type: #{index}/, stdout)
    end
  end

  # Skips unless this Ruby can require every feature (a framework an
  # integration test boots), in a child process so nothing loads here.
  def skip_unless_loadable(features, reason)
    _out, _err, status = run_ruby("-e", features.map { |feature| "require #{feature.inspect}" }.join("; "), gems: true)
    skip reason unless status.success?
  end

  def go_available?
    @go_available = system("go version > /dev/null 2>&1") if @go_available.nil?
    @go_available
  end

  # Sum of a sample type over the samples that match the block.
  def total(profile, type, &filter)
    index = profile.value_index(type)
    profile.samples.select { |s| filter.nil? || filter.call(s) }.sum { |s| s.values[index] }
  end

  def function_names(profile, sample)
    profile.frames(sample).map { |function, _line| function.name }
  end

  def in_function?(profile, sample, name)
    function_names(profile, sample).include?(name)
  end

  def thread_name(sample)
    sample.labels["thread name"]
  end

  def assert_within(expected, actual, tolerance, message = nil)
    low = expected * (1 - tolerance)
    high = expected * (1 + tolerance)
    record_spread(expected, actual, tolerance, message)
    assert actual.between?(low, high),
           "#{message || "value"}: expected #{expected.round(4)} ± #{(tolerance * 100).round}%, got #{actual.round(4)}"
  end

  # SONDE_SPREAD_LOG=FILE: every assert_within, assert_in_delta and numeric
  # assert_operator appends what it compared, one JSON line, so that the
  # spread behind a statistical bound can be measured over many runs
  # (script/spread sums them up per test and assertion).
  def record_spread(expected, actual, tolerance, message)
    log_spread(kind: "within", what: message, expected: expected, actual: actual, tolerance: tolerance,
               error: expected.zero? ? nil : (actual - expected).fdiv(expected))
  end

  def assert_in_delta(expected, actual, delta = 0.001, message = nil)
    if expected.is_a?(Numeric) && actual.is_a?(Numeric)
      log_spread(kind: "delta", what: message, expected: expected, actual: actual, tolerance: delta)
    end
    super
  end

  def assert_operator(left, operator, right = Minitest::Assertions::UNDEFINED, message = nil)
    if left.is_a?(Numeric) && right.is_a?(Numeric)
      log_spread(kind: "operator", what: message.respond_to?(:call) ? message.call : message, actual: left,
                 operator: operator, bound: right)
    end
    super
  end

  def log_spread(**fields)
    path = ENV["SONDE_SPREAD_LOG"]
    return unless path

    where = caller_locations.find { |l| l.path.end_with?("_test.rb") }
    fields[:what] = fields[:what].to_s[0, 120] if fields[:what]
    line = JSON.generate({ test: "#{self.class}##{name}", line: where&.lineno }.merge(fields))
    File.open(path, "a") { |f| f.puts(line) }
  end
end

# SONDE_TEST_TIMES=FILE: each test's wall time and CPU time (this process
# and the children it waited for, user + sys), one "wall cpu Class#test"
# line per test, appended to FILE (`sort -rn -k2 FILE | head` lists the
# costliest): what to look at when the suite gets slow. CI's two queues
# share 2 cores, so CPU, not wall time, is what a test costs the others.
module TestTimes
  def run
    path = ENV["SONDE_TEST_TIMES"]
    return super unless path

    before = Process.times
    result = super
    after = Process.times
    cpu = %i[utime stime cutime cstime].sum { |field| after.public_send(field) - before.public_send(field) }
    File.open(path, "a") { |f| f.puts(format("%.2f %.2f %s#%s", result.time, cpu, self.class, name)) }
    result
  end
end
Minitest::Test.prepend(TestTimes)
