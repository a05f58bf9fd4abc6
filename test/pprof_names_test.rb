# frozen_string_literal: true

require_relative "support/test_helper"
require "zlib"

# Function names must reach pprof viewers whole. `go tool pprof` treats a
# name whose system_name equals it as not yet demangled and, finding <...>
# or (...), cuts them out as C++ template and parameter lists: "block (2
# levels) in <main>" became "block  in " and "<main>" became "" (shown as
# <unknown>). Sonde writes no system_name, which marks the name as final.
class PprofNamesTest < Minitest::Test
  include SondeTestHelper

  def test_go_tool_pprof_shows_block_and_main_names_whole
    skip "go is not installed (apt-get install golang-go)" unless go_available?
    Dir.mktmpdir do |dir|
      out = File.join(dir, "names.pprof")
      run_workload("gvl_released_c", out, "0.5")
      top, stderr, status = Open3.capture3("go", "tool", "pprof", "-top", "-nodecount=100", out)
      assert_succeeded status, stderr
      names = Sonde::Pprof.read(out).functions.values.map(&:name)
      assert_includes names, "<main>"
      assert_includes top, "<main>"
      refute_includes top, "<unknown>"
      refute_match(/block +in +$/, top)
      # Ruby 3.1's backend names blocks as Ruby's backtraces do.
      if Sonde::Platform.backend == :mjit_header
        assert_includes names, "block (2 levels) in <main>"
        assert_includes top, "block (2 levels) in <main>"
      end
    end
  end
  # Ruby lets a thread be named, and a file be loaded from a path, with
  # bytes that are not UTF-8; protobuf strings must be UTF-8, and Go's
  # protobuf decoder (an OpenTelemetry Collector, Pyroscope) refuses a
  # whole profile over one such byte. Each invalid byte is written as
  # U+FFFD: before, the bytes went in as they were.
  def test_names_that_are_not_utf8_are_written_as_valid_utf8
    klass = Class.new
    klass.class_eval(<<~RUBY, "/srv/app/odd\xFF.rb".b, 1)
      def spin_in_odd_file(seconds)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
        nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      end
    RUBY
    recorded = Sonde.profile(rate: 1000) do
      Thread.new do
        Thread.current.name = "w\xFF\xFE".b
        klass.new.spin_in_odd_file(0.2)
      end.join
    end
    # The bytes written (Sonde::Pprof.decode scrubs what it reads, so the
    # decoded names alone would not tell).
    raw = Zlib.gunzip(recorded.pprof).b
    refute raw.include?("w\xFF\xFE".b), "the thread name's invalid bytes were written as they are"
    refute raw.include?("odd\xFF.rb".b), "the file name's invalid byte was written as it is"
    assert raw.include?("w\u{FFFD}\u{FFFD}".b), "the thread name, scrubbed"
    profile = recorded.decode
    thread_names = profile.samples.map { |sample| sample.labels["thread name"] }.uniq
    assert_includes thread_names, "w\u{FFFD}\u{FFFD}"
    spin = profile.functions.values.find { |function| function.name.end_with?("#spin_in_odd_file") }
    assert spin, "the method's function: #{profile.functions.values.map(&:name)}"
    assert_equal "/srv/app/odd\u{FFFD}.rb", spin.filename
    strings = thread_names + profile.functions.values.flat_map { |function| [function.name, function.filename] }
    assert(strings.all? { |text| text.dup.force_encoding(Encoding::UTF_8).valid_encoding? }, strings.inspect)
  end
end
