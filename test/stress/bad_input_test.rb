# frozen_string_literal: true

require_relative "stress_helper"
require_relative "pprof_forge"
require "sonde/cli"
require "fileutils"
require "stringio"
require "zlib"

# Bad input (tracker issue 7, case 7). Proves that whatever a user gets wrong
# is refused at the boundary, at once, in one line that names what is wrong:
#
# 1. Options: every option of Sonde.start (all of Sonde::Options::SETTINGS;
#    the table must cover each one) with wrong types and out-of-range values
#    as a keyword, and every SONDE_* variable with garbage, read by
#    Sonde.start and by `require "sonde/auto"`: a Sonde::ArgumentError (a
#    Sonde::Error) whose one-line message names the option (or variable),
#    shows the bad value and says what is accepted (all three asserted). The
#    auto-started application still runs, unprofiled, with one warning line;
#    `sonde record` with a bad variable exits 2 before running its command.
# 2. Unwritable output: `sonde record -o` into a missing directory, a
#    read-only directory and a directory that even root cannot write (sysfs),
#    Sonde.profile(out:), and the dir: exporter on such directories: the
#    error comes at start, before the program runs (it never writes its
#    marker file and the error comes well under the program's run time).
# 3. Corrupt profiles: empty, truncated (gzip and raw), random bytes, gzip of
#    garbage, corrupt gzip, gzip of a protobuf that is not a Profile, overlong
#    and overflowing varints, string indexes out of range, missing
#    locations/functions, wrong wire types, devices, directories, missing
#    files, to every command that reads profiles (report, convert to
#    collapsed and to speedscope, flamegraph): exit 1, nothing on stdout, one
#    line "sonde CMD: FILE: what is wrong", no backtrace. Odd but valid
#    profiles (negative and int64-extreme values, numeric thread names, huge
#    ids, no sample types, deep stacks, hostile names and file names) are
#    read: exit 0, or for a profile with no sample types (nothing to report
#    or convert) a one-line file error.
#    A pipe (/dev/stdin) is read like a file; a device (/dev/zero,
#    /dev/urandom) is refused at once instead of being read forever.
#    Each case runs in-process through Sonde::CLI.run (the executable's code);
#    a sample (all of them under SONDE_STRESS=full) through exe/sonde.
class BadInputOptionsTest < Minitest::Test
  include SondeTestHelper

  # option => what the message must say is accepted.
  ACCEPTED = {
    rate: /an Integer from 1 to 5000/,
    max_frames: /an Integer from 1 to 10000/,
    signals: /must be true or false|expected one of 1, true, yes, on, 0, false, no, off/,
    overhead_target: /a number above 0 and at most 20/,
    gc: /must be true or false|expected one of 1, true, yes, on, 0, false, no, off/,
    continuous: /must be true or false/,
    alloc: /must be true or false|expected one of 1, true, yes, on, 0, false, no, off/,
    heap: /must be true or false|expected one of 1, true, yes, on, 0, false, no, off/,
    alloc_interval: /an Integer from 1 to 10000000 \(allocations per sample, on average\)/,
    alloc_duty: /a number from 0.01 to 1 \(the share of ticks during which allocations are listened to\)/,
    timeline: /must be true or false|expected one of 1, true, yes, on, 0, false, no, off/,
    every: /a number of seconds from 1 to 3600/,
    export: %r{dir:PATH, pyroscope:URL, datadog:URL},
    service: /a non-empty String/,
    env: /a non-empty String/,
    version: /a non-empty String/,
    tags: /a Hash of String\/Symbol => String|"key:value,key:value"/,
  }.freeze

  # [option, Ruby expression of the bad value, other keywords]: evaluated in
  # the child that calls Sonde.start.
  KEYWORD_CASES = [
    [:rate, "0"], [:rate, "5001"], [:rate, "-1"], [:rate, "100.0"], [:rate, '"100"'], [:rate, "nil"],
    [:rate, "true"], [:rate, "2**70"], [:rate, "Float::NAN"], [:rate, "[100]"], [:rate, '"x" * 10_000'],
    [:max_frames, "0"], [:max_frames, "10_001"], [:max_frames, "1.5"], [:max_frames, '"400"'], [:max_frames, "nil"],
    [:signals, '"false"'], [:signals, "nil"], [:signals, "0"], [:signals, ":off"],
    [:overhead_target, "0"], [:overhead_target, "-1"], [:overhead_target, "20.0001"], [:overhead_target, "Float::NAN"],
    [:overhead_target, "Float::INFINITY"], [:overhead_target, '"1"'], [:overhead_target, "nil"],
    [:overhead_target, "Complex(1, 0)"], [:overhead_target, "true"],
    [:gc, '"true"'], [:gc, "1"], [:gc, "nil"],
    [:continuous, '"yes"'], [:continuous, "1"], [:continuous, "nil"],
    [:alloc, '"true"'], [:alloc, "1"], [:alloc, "nil"],
    [:heap, '"yes"'], [:heap, "0"], [:heap, "nil"],
    [:alloc_interval, "0"], [:alloc_interval, "-1"], [:alloc_interval, "10_000_001"], [:alloc_interval, "1.5"],
    [:alloc_interval, '"1024"'], [:alloc_interval, "nil"], [:alloc_interval, "2**70"],
    [:alloc_duty, "0"], [:alloc_duty, "0.001"], [:alloc_duty, "1.5"], [:alloc_duty, "-0.5"], [:alloc_duty, '"0.1"'],
    [:alloc_duty, "nil"], [:alloc_duty, "Float::NAN"], [:alloc_duty, "Float::INFINITY"],
    [:timeline, '"yes"'], [:timeline, "1"], [:timeline, "nil"],
    [:every, "0"], [:every, "0.5"], [:every, "3601"], [:every, "Float::NAN"], [:every, "Float::INFINITY"],
    [:every, '"60"'], [:every, "nil"], [:every, "Rational(1, 3)"],
    [:export, '""'], [:export, "nil"], [:export, '"s3:bucket"'], [:export, '"dir:"'], [:export, '"dir:a,,dir:b"'],
    [:export, '"dir:a,"'], [:export, ":dir"], [:export, "[]"], [:export, '["dir:a", 1]'],
    [:export, '"dir:/tmp/\xFF".dup.force_encoding("UTF-8")'],
    # Only continuous mode builds the exporters: these pass Options and are refused by Exporters.parse.
    [:export, '"pyroscope:ftp://host"', { continuous: true }], [:export, '"datadog:http://"', { continuous: true }],
    [:export, '"dir:/etc/passwd/profiles"', { continuous: true }],
    [:service, '""'], [:service, '"   "'], [:service, ":web"], [:service, "42"], [:service, '"a\nb"'],
    [:service, '"\xFF".dup.force_encoding("UTF-8")'],
    [:env, '""'], [:env, "[]"], [:env, '"\e[31m"'],
    [:version, '""'], [:version, "1.2"], [:version, '"\xFF".dup.force_encoding("UTF-8")'],
    [:tags, '"team:web"'], [:tags, "nil"], [:tags, '{ "a" => 1 }'], [:tags, '{ 1 => "a" }'], [:tags, '[["a", "b"]]'],
    [:tags, '{ "a" => "\xFF".dup.force_encoding("UTF-8") }'],
  ].freeze

  # [variable, garbage]. Bytes that are not UTF-8 are given as such.
  ENV_CASES = [
    ["SONDE_RATE", "fast"], ["SONDE_RATE", "0"], ["SONDE_RATE", "5001"], ["SONDE_RATE", "-1"], ["SONDE_RATE", "1.5"],
    ["SONDE_RATE", "1e3"], ["SONDE_RATE", "0x10"], ["SONDE_RATE", "99999999999999999999999"], ["SONDE_RATE", "\xFF".b],
    ["SONDE_RATE", " "],
    ["SONDE_MAX_FRAMES", "0"], ["SONDE_MAX_FRAMES", "10001"], ["SONDE_MAX_FRAMES", "many"], ["SONDE_MAX_FRAMES", "4 00"],
    ["SONDE_NO_SIGNALS", "2"], ["SONDE_NO_SIGNALS", "y"], ["SONDE_NO_SIGNALS", "si"],
    ["SONDE_OVERHEAD_TARGET", "0"], ["SONDE_OVERHEAD_TARGET", "-1"], ["SONDE_OVERHEAD_TARGET", "21"],
    ["SONDE_OVERHEAD_TARGET", "NaN"], ["SONDE_OVERHEAD_TARGET", "Infinity"], ["SONDE_OVERHEAD_TARGET", "1e999"],
    ["SONDE_OVERHEAD_TARGET", "5%"],
    ["SONDE_GC", "maybe"], ["SONDE_GC", "2"], ["SONDE_GC", "truee"], ["SONDE_GC", "\xFF".b],
    ["SONDE_ALLOC", "maybe"], ["SONDE_ALLOC", "2"], ["SONDE_HEAP", "si"], ["SONDE_HEAP", "\xFF".b],
    ["SONDE_ALLOC_INTERVAL", "0"], ["SONDE_ALLOC_INTERVAL", "often"], ["SONDE_ALLOC_INTERVAL", "1e3"],
    ["SONDE_ALLOC_INTERVAL", "10000001"],
    ["SONDE_ALLOC_DUTY", "0"], ["SONDE_ALLOC_DUTY", "often"], ["SONDE_ALLOC_DUTY", "2"], ["SONDE_ALLOC_DUTY", "5%"],
    ["SONDE_TIMELINE", "maybe"], ["SONDE_TIMELINE", "2"], ["SONDE_TIMELINE", "\xFF".b],
    ["SONDE_EVERY", "0"], ["SONDE_EVERY", "0.5"], ["SONDE_EVERY", "3601"], ["SONDE_EVERY", "1e999"],
    ["SONDE_EVERY", "soon"], ["SONDE_EVERY", "-5"],
    ["SONDE_EXPORT", "ftp://x"], ["SONDE_EXPORT", "dir:"], ["SONDE_EXPORT", "dir:a,,dir:b"], ["SONDE_EXPORT", "dir:a,"],
    ["SONDE_EXPORT", "s3:bucket"], ["SONDE_EXPORT", "pyroscope:"], ["SONDE_EXPORT", "dir:/tmp/\xFF".b],
    ["SONDE_SERVICE", "\xFF".b], ["SONDE_SERVICE", "a\tb"], ["SONDE_SERVICE", "   "],
    ["SONDE_ENV", "\x01"], ["SONDE_VERSION", "\xFF".b],
    ["SONDE_TAGS", "team"], ["SONDE_TAGS", ","], ["SONDE_TAGS", "a:b,"], ["SONDE_TAGS", ":x"], ["SONDE_TAGS", "x:"],
    ["SONDE_TAGS", "a:b,,c:d"], ["SONDE_TAGS", "\xFF".b],
  ].freeze

  # The variables the environment tests pass through exporters too (auto
  # sets continuous: true).
  AUTO_ONLY_CASES = [["SONDE_EXPORT", "dir:/etc/passwd/profiles"], ["SONDE_EXPORT", "pyroscope:ftp://host"]].freeze

  def setup
    @dir = Dir.mktmpdir("sonde-bad-input")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def option_of(variable)
    Sonde::Options::SETTINGS.find { |setting| setting.variable == variable }.name
  end

  def test_the_tables_cover_every_option_and_variable
    settings = Sonde::Options::SETTINGS
    assert_equal settings.map(&:name).sort, KEYWORD_CASES.map(&:first).uniq.sort, "a keyword case for every option"
    assert_equal settings.filter_map(&:variable).sort, ENV_CASES.map(&:first).uniq.sort, "a case for every variable"
    assert_equal settings.map(&:name).sort, ACCEPTED.keys.sort
  end

  # Runs the cases in one child: each Sonde.start fails before any sampling.
  def start_in_child(script, cases)
    input = File.join(@dir, "cases.bin")
    output = File.join(@dir, "results.bin")
    File.binwrite(input, Marshal.dump(cases))
    _stdout, stderr, status = SondeStress.run_ruby("-rsonde", "-e", script, input, output, timeout: 120, chdir: @dir)
    assert status.success?, "the child failed:\n#{stderr}"
    Marshal.load(File.binread(output)) # rubocop:disable Security/MarshalLoad -- our own child's output
  end

  CHILD_PREAMBLE = <<~RUBY
    cases = Marshal.load(File.binread(ARGV[0]))
    def attempt
      Sonde.start(**yield)
      Sonde.stop
      { started: true }
    rescue Exception => e # rubocop:disable Lint/RescueException
      { class: e.class.name, sonde_error: e.is_a?(Sonde::Error), message: e.message }
    end
  RUBY

  def assert_refused(result, what, option:, named:, value:)
    refute result[:started], "#{what}: Sonde.start accepted it"
    assert_equal "Sonde::ArgumentError", result[:class], "#{what}: #{result[:class]}: #{result[:message]}"
    assert result[:sonde_error], "#{what}: not a Sonde::Error"
    message = result[:message]
    refute_includes message, "\n", "#{what}: the message is one line"
    assert_match named, message, "#{what}: the message names the option"
    assert_includes message, value, "#{what}: the message shows the value"
    assert_match ACCEPTED.fetch(option), message, "#{what}: the message says what is accepted"
    assert_operator message.length, :<, 400, "#{what}: the message stays short"
  end

  def test_every_option_as_a_keyword_with_wrong_types_and_out_of_range_values
    script = CHILD_PREAMBLE + <<~RUBY
      results = cases.map do |option, expression, extra|
        value = eval(expression) # rubocop:disable Security/Eval -- the test's own table
        result = attempt { (extra || {}).merge(option => value) }
        result.merge(shown: value.inspect[0, 60])
      end
      File.binwrite(ARGV[1], Marshal.dump(results))
    RUBY
    results = start_in_child(script, KEYWORD_CASES)
    KEYWORD_CASES.zip(results).each do |(option, expression, extra), result|
      # Exporter errors name the keyword, as every other option's do.
      named = extra ? /\bexport\b/ : /(?<![\w])#{option}(?![\w])/
      assert_refused(result, "#{option}: #{expression}", option: option, named: named, value: result[:shown])
    end
    SondeStress.record("bad input keywords", cases: KEYWORD_CASES.size)
  end

  def test_an_unknown_keyword_is_named_with_the_accepted_ones
    script = CHILD_PREAMBLE + <<~RUBY
      File.binwrite(ARGV[1], Marshal.dump([attempt { { rates: 10 } }, attempt { { "rate" => 10 } }]))
    RUBY
    start_in_child(script, []).each do |result|
      assert_equal "Sonde::ArgumentError", result[:class], result[:message]
      assert_match(/unknown option :?"?rates?"?; accepted: :rate, :max_frames, :signals/, result[:message])
    end
  end

  def shown_raw(raw)
    raw.dup.force_encoding(Encoding::UTF_8).inspect
  end

  def test_every_variable_with_garbage_read_by_sonde_start
    script = CHILD_PREAMBLE + <<~RUBY
      results = cases.map do |variable, raw|
        ENV[variable] = raw
        result = attempt { {} }
        ENV.delete(variable)
        result
      end
      File.binwrite(ARGV[1], Marshal.dump(results))
    RUBY
    results = start_in_child(script, ENV_CASES)
    ENV_CASES.zip(results).each do |(variable, raw), result|
      assert_refused(result, "#{variable}=#{raw.inspect}", option: option_of(variable), named: /\A#{variable}=/,
                                                           value: shown_raw(raw))
    end
    SondeStress.record("bad input variables (Sonde.start)", cases: ENV_CASES.size)
  end

  # sonde/auto never stops the application: it runs, unprofiled, and the
  # reason is one line on stderr, printed before the application's first.
  def test_every_variable_with_garbage_through_sonde_auto
    cases = ENV_CASES + AUTO_ONLY_CASES
    # Short mode: the first case of each variable (every variable still goes through auto).
    cases = cases.uniq(&:first) + AUTO_ONLY_CASES unless SondeStress.full?
    queue = Queue.new
    cases.each { |c| queue << c }
    results = {}
    workers = Array.new(2) do
      Thread.new do
        while (item = (queue.pop(true) rescue nil)) # rubocop:disable Style/RescueModifier
          variable, raw = item
          results[item] = SondeStress.run_command({ variable => raw }, RbConfig.ruby, "-I#{SondeStress::LIB}", "-rsonde/auto",
                                                  "-e", '$stderr.puts "app ran, profiling=#{Sonde.running?}"',
                                                  timeout: 60, chdir: @dir)
        end
      end
    end
    workers.each(&:join)
    cases.each do |item|
      variable, raw = item
      what = "#{variable}=#{raw.inspect}"
      stdout, stderr, status = results.fetch(item)
      assert status.success?, "#{what}: the application must still run:\n#{stderr}"
      assert_equal "", stdout
      lines = stderr.lines
      assert_equal 2, lines.size, "#{what}: one warning line, then the application's:\n#{stderr}"
      assert_equal "app ran, profiling=false\n", lines.last, what
      warning = lines.first.chomp
      assert_match(%r{\Asonde/auto: not profiling process \d+: #{variable}}, warning, what)
      detail = warning.sub(/\Asonde\/auto: not profiling process \d+: /, "")
      named = %r{\A#{variable}(=|: )}
      assert_refused({ class: "Sonde::ArgumentError", sonde_error: true, message: detail }, what,
                     option: option_of(variable), named: named, value: shown_raw(raw))
    end
    refute Dir.exist?(File.join(@dir, "sonde-profiles")), "no run may have exported anything"
    SondeStress.record("bad input variables (sonde/auto)", cases: cases.size)
  end

  def test_sonde_record_refuses_a_bad_variable_before_running_the_command
    marker = File.join(@dir, "ran")
    [["SONDE_RATE", "abc"], ["SONDE_MAX_FRAMES", "0"], ["SONDE_EXPORT", "s3:bucket"]].each do |variable, raw|
      _stdout, stderr, status = SondeStress.run_command(
        { variable => raw }, RbConfig.ruby, EXE, "record", "-o", File.join(@dir, "x.pprof"), "--",
        RbConfig.ruby, "-e", "File.write(#{marker.inspect}, 'ran')", timeout: 60
      )
      assert_equal 2, status.exitstatus, "#{variable}=#{raw}: #{stderr}"
      assert_equal 1, stderr.lines.size, stderr
      assert_match(/\Asonde record: #{variable}=#{Regexp.escape(raw.inspect)}: /, stderr)
      assert_match ACCEPTED.fetch(option_of(variable)), stderr
      refute File.exist?(marker), "#{variable}=#{raw}: the command must not run"
    end
  end
end

# Unwritable output: the error comes at start, not after the run.
class BadInputOutputTest < Minitest::Test
  include SondeTestHelper

  # The profiled program's run time: the error must come well before it.
  PROGRAM_SECONDS = 6

  def setup
    @dir = Dir.mktmpdir("sonde-bad-output")
    File.chmod(0o777, @dir) # the unprivileged runs write their marker here
    @marker = File.join(@dir, "program-ran")
    @program = [RbConfig.ruby, "-e", "File.write(#{@marker.inspect}, 'ran'); sleep #{PROGRAM_SECONDS}"]
    @read_only = File.join(@dir, "read-only")
    Dir.mkdir(@read_only)
    File.chmod(0o555, @read_only)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def root?
    Process.uid.zero?
  end

  # Root writes into a 0555 directory: run as nobody then (setpriv, util-linux).
  def unprivileged(argv)
    return argv unless root?

    skip "running as root and setpriv is missing: cannot test a read-only directory" unless system("command -v setpriv > /dev/null")
    ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
  end

  # A directory no one can create a file in, root included (sysfs), or nil.
  def unwritable_even_for_root
    return @unwritable if defined?(@unwritable)

    @unwritable = ["/sys", "/proc"].find do |dir|
      next false unless File.directory?(dir)

      probe = File.join(dir, ".sonde-probe-#{Process.pid}")
      File.open(probe, File::WRONLY | File::CREAT | File::EXCL) { nil }
      File.unlink(probe)
      false
    rescue SystemCallError
      true
    end
  end

  def record(output, wrap: false)
    argv = [RbConfig.ruby, EXE, "record", "-o", output, "--", *@program]
    argv = unprivileged(argv) if wrap
    started = SondeStress.now
    stdout, stderr, status = SondeStress.run_command({}, *argv, timeout: 60)
    [stdout, stderr, status, SondeStress.now - started]
  end

  def assert_fails_at_start(stderr, status, seconds, pattern, what)
    assert_equal 2, status.exitstatus, "#{what}: #{stderr}"
    assert_equal 1, stderr.lines.size, "#{what}: one line:\n#{stderr}"
    assert_match pattern, stderr, what
    refute File.exist?(@marker), "#{what}: the program must not have run"
    assert_operator seconds, :<, PROGRAM_SECONDS / 2.0, "#{what}: the error must come at start"
  end

  def test_record_into_a_missing_directory
    _, stderr, status, seconds = record("/nonexistent/dir/x.pprof")
    assert_fails_at_start(stderr, status, seconds, %r{\Asonde record: cannot write /nonexistent/dir/x\.pprof: directory /nonexistent/dir does not exist}, "missing directory")
  end

  def test_record_into_a_read_only_directory
    output = File.join(@read_only, "x.pprof")
    _, stderr, status, seconds = record(output, wrap: true)
    assert_fails_at_start(stderr, status, seconds, /\Asonde record: cannot write #{Regexp.escape(output)}: .*(not writable|Permission denied)/, "read-only directory")
  end

  def test_record_into_a_directory_root_cannot_write_either
    dir = unwritable_even_for_root
    skip "no directory here refuses new files to root (/sys, /proc)" unless dir
    output = File.join(dir, "x.pprof")
    _, stderr, status, seconds = record(output)
    assert_fails_at_start(stderr, status, seconds, /\Asonde record: cannot write #{Regexp.escape(output)}: /, dir)
  end

  def test_record_into_a_path_that_is_a_directory_or_an_existing_file_in_a_file
    [[@dir, /is a directory/], [File.join(EXE, "x.pprof"), /does not exist/]].each do |output, pattern|
      _, stderr, status, seconds = record(output)
      assert_fails_at_start(stderr, status, seconds, pattern, output)
    end
  end

  def test_sonde_profile_checks_out_before_running_the_block
    script = <<~RUBY
      ran = false
      begin
        Sonde.profile(out: ARGV[0]) { ran = true }
        puts "profiled"
      rescue Sonde::ArgumentError => e
        puts "refused ran=\#{ran}: \#{e.message}"
      end
    RUBY
    stdout, stderr, status = SondeStress.run_ruby("-rsonde", "-e", script, "/nonexistent/dir/x.pprof", timeout: 60)
    assert_succeeded status, stderr
    assert_match %r{\Arefused ran=false: cannot write /nonexistent/dir/x\.pprof: directory /nonexistent/dir does not exist}, stdout

    dir = unwritable_even_for_root
    return unless dir && root?

    stdout, = SondeStress.run_ruby("-rsonde", "-e", script, File.join(dir, "x.pprof"), timeout: 60)
    # access(2) says yes to root for sysfs: Profile.check_writable! probes
    # with a real file, so the block never runs.
    assert stdout.start_with?("refused ran=false"), "Sonde.profile(out: #{dir}/x.pprof) as root: #{stdout}"
  end

  def exporter_start(export, wrap: false)
    script = <<~RUBY
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      begin
        Sonde.start(continuous: true, export: ARGV[0])
        puts "started"
      rescue Sonde::Error => e
        printf("refused after %.3f s: %s: %s\\n", Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, e.class, e.message)
      end
    RUBY
    argv = [RbConfig.ruby, "-I#{SondeStress::LIB}", "-rsonde", "-e", script, export]
    argv = unprivileged(argv) if wrap
    SondeStress.run_command({}, *argv, timeout: 60, chdir: @dir)
  end

  def assert_exporter_refused(stdout, stderr, status, path, what)
    assert status.success?, "#{what}: #{stderr}"
    assert_match(/\Arefused after (\d+\.\d+) s: Sonde::ArgumentError: export: "dir:#{Regexp.escape(path)}" is not accepted: /, stdout, what)
    assert_operator stdout[/after (\d+\.\d+) s/, 1].to_f, :<, 1.0, "#{what}: at start"
    assert_match(/accepted: one or more of dir:PATH/, stdout, what)
    assert_equal 1, stdout.lines.size
  end

  def test_directory_exporter_on_an_unwritable_directory_fails_at_start
    stdout, stderr, status = exporter_start("dir:#{@read_only}", wrap: true)
    assert_exporter_refused(stdout, stderr, status, @read_only, "read-only directory")

    missing_parent = File.join(EXE, "profiles") # under a file: cannot be created
    stdout, stderr, status = exporter_start("dir:#{missing_parent}")
    assert_exporter_refused(stdout, stderr, status, missing_parent, "directory under a file")

    dir = unwritable_even_for_root
    return unless dir

    stdout, stderr, status = exporter_start("dir:#{dir}")
    assert_exporter_refused(stdout, stderr, status, dir, dir)
  end

  # Through sonde/auto the application still runs, unprofiled, and the
  # warning comes before its first line.
  def test_directory_exporter_through_sonde_auto
    argv = unprivileged([RbConfig.ruby, "-I#{SondeStress::LIB}", "-rsonde/auto", "-e",
                         '$stderr.puts "app ran, profiling=#{Sonde.running?}"'])
    _stdout, stderr, status = SondeStress.run_command({ "SONDE_EXPORT" => "dir:#{@read_only}" }, *argv, timeout: 60)
    assert_succeeded status, stderr
    lines = stderr.lines
    assert_equal 2, lines.size, stderr
    assert_match(%r{\Asonde/auto: not profiling process \d+: SONDE_EXPORT="dir:#{Regexp.escape(@read_only)}": not accepted: .*not writable.*; accepted: }, lines.first)
    assert_equal "app ran, profiling=false\n", lines.last
  end
end

# Corrupt and odd profiles to every command that reads profiles.
class BadInputProfilesTest < Minitest::Test
  include SondeTestHelper

  # argv after the file name; out: whether the command writes on stdout.
  COMMANDS = {
    "report" => [],
    "report --by thread" => %w[--by thread],
    "convert collapsed" => %w[--to collapsed],
    "convert speedscope" => %w[--to speedscope],
    "flamegraph" => [],
  }.freeze

  def self.valid
    PprofForge::Builder.standard
  end

  def self.corrupt_cases
    forge = PprofForge
    valid_raw = valid.encode
    valid_gzip = valid.gzip
    cases = {
      "empty" => ["".b, /not a pprof profile: empty input/],
      "truncated gzip" => [valid_gzip[0, valid_gzip.bytesize / 2], /truncated gzip data/],
      "truncated raw" => [valid_raw[0, valid_raw.bytesize - 3], /truncated|past the end/],
      "random bytes" => [Random.new(7).bytes(4096), /not a pprof profile: /],
      "text" => ["hello, world\n" * 3, /not a pprof profile: /],
      "gzip of garbage" => [Zlib.gzip(Random.new(8).bytes(3000)), /not a pprof profile: /],
      "gzip of text" => [Zlib.gzip("hello, world\n" * 10), /not a pprof profile: /],
      "gzip with a bad checksum" => [valid_gzip.dup.tap { |g| g.setbyte(g.bytesize - 6, g.getbyte(g.bytesize - 6) ^ 0xff) },
                                     /corrupt gzip data/],
      "gzip with a bad method" => [valid_gzip.dup.tap { |g| g.setbyte(2, 7) }, /corrupt gzip data/],
      "gzip of an empty stream" => [Zlib.gzip(""), /empty after decompression/],
      "gzip of another message" => [Zlib.gzip(forge.message([1, 1_700_000_000], [2, 5])),
                                    /field 1 has wire type 0, expected 2/],
      "gzip of unknown fields only" => [Zlib.gzip(forge.message([20, "x" * 50], [21, 7])), /the string table is empty/],
      "varint longer than 10 bytes" => [forge.tag(9, 0) + ("\xff".b * 10) + "\x01".b, /varint longer than 10 bytes/],
      "varint over 64 bits" => [valid.tap { |f| f.scalar(10, (1 << 64) + 5) }.encode, /varint overflows 64 bits/],
      "huge length" => [forge.tag(2, 2) + forge.varint((1 << 62) + 1) + "abc".b, /past the end of its message/],
      "length past the end" => [valid_raw + forge.tag(6, 2) + forge.varint(1000) + "abc".b, /past the end of its message/],
      "function name index out of range" => [valid.tap { |f| f.function(3, 99, "x.rb") }.encode,
                                             /function 3 refers to string 99, but the string table has \d+/],
      "label string out of range" => [valid.tap { |f| f.raw(2, forge.message([1, forge.packed([1])], [2, forge.packed([1, 1, 1, 1])], [3, forge.message([1, 1], [2, 1_000_000])])) }.encode,
                                      /a label of sample 4 refers to string 1000000/],
      "label key index 2**64-1" => [valid.tap { |f| f.raw(2, forge.message([1, forge.packed([1])], [2, forge.packed([1, 1, 1, 1])], [3, forge.message([1, (1 << 64) - 1], [3, 1])])) }.encode,
                                    /refers to string 18446744073709551615/],
      "sample type index out of range" => [valid.tap { |f| f.raw(1, forge.message([1, 1], [2, 500])) }.encode,
                                           /sample type 5 refers to string 500/],
      "default sample type out of range" => [valid.tap { |f| f.scalar(14, 77) }.encode, /default sample type refers to string 77/],
      "comment out of range" => [valid.tap { |f| f.scalar(13, 88) }.encode, /a comment refers to string 88/],
      "no string table" => [valid.encode(string_table: []), /the string table is empty/],
      "string table without the empty string" => [valid.encode(string_table: %w[x cpu-time]),
                                                  /does not start with the empty string/],
      "missing location" => [valid.tap { |f| f.sample([1, 42], [1, 1, 1, 1]) }.encode, /sample 4 refers to missing location 42/],
      "missing function" => [valid.tap { |f| f.location(3, 9, 1) }.encode, /location 3 refers to missing function 9/],
      "too few values" => [valid.tap { |f| f.sample([1], [1, 1]) }.encode, /sample 4 has 2 values for 4 sample types/],
      "too many values" => [valid.tap { |f| f.sample([1], [1] * 9) }.encode, /sample 4 has 9 values for 4 sample types/],
      "wire type 3 (group)" => [valid_raw + forge.tag(15, 3), /unsupported wire type 3/],
      "wire type 7" => [valid_raw + forge.tag(15, 7), /unsupported wire type 7/],
      "field number 0" => [valid_raw + forge.tag(0, 0) + forge.varint(1), /field number 0/],
      "truncated fixed64" => [valid_raw + forge.tag(15, 1) + "\x01\x02".b, /truncated fixed-size field 15/],
      "sample as a varint" => [valid_raw + forge.tag(2, 0) + forge.varint(5), /field 2 has wire type 0, expected 2/],
      "time as a string" => [valid_raw + forge.field(9, "soon"), /field 9 has wire type 2, expected 0/],
      "location line as a varint" => [valid_raw + forge.field(4, forge.message([1, 7], [4, 3])), /field location.line has wire type 0/],
    }
    cases.to_h { |name, (bytes, pattern)| [name, [bytes.b, pattern]] }
  end

  # Structurally valid profiles with odd content: every command reads them.
  def self.odd_cases
    forge = PprofForge
    int64_max = (1 << 63) - 1
    int64_min = -(1 << 63)
    deep = valid.tap do |f|
      ids = (10...5010).map do |id|
        f.function(id, "Deep#level_#{id}", "deep.rb", id)
        f.location(id, id, id)
        id
      end
      f.sample(ids, [1, 1, 1, 1], "thread id" => 3, "thread name" => "deep")
    end
    hostile = valid.tap do |f|
      f.function(7, "</script><script>alert(1)</script>;a\nb", "<b>&\"'.rb", 1)
      f.function(8, "\xFF\xFEbroken", "\xC3(.rb", 2)
      f.location(7, 7, 1)
      f.location(8, 8, 2)
      f.sample([7, 8], [3, 1, 3, 1], "thread id" => 4, "thread name" => "</script>\u0000\u202e", "state" => "\xFF")
    end
    {
      "negative values" => valid.tap { |f| f.sample([1], [-50_000_000, 1, -1, 1]) },
      "all values negative" => PprofForge::Builder.new.tap do |f|
        f.sample_type("cpu-time", "nanoseconds")
        f.sample_type("wall-time", "nanoseconds")
        f.function(1, "f", "f.rb")
        f.location(1, 1, 1)
        f.sample([1], [-5, -7], "thread id" => 1)
      end,
      "int64 extremes" => valid.tap { |f| 4.times { f.sample([1, 2], [int64_max, int64_max, int64_max, int64_min]) } },
      "values that cancel out" => valid.tap { |f| f.sample([2], [-15_000_000, -2, -35_000_000, -3]) },
      "numeric thread name, string thread id, numeric state" =>
        valid.tap { |f| f.sample([1], [1, 1, 1, 1], "thread name" => 7, "thread id" => "x", "state" => 3) },
      "ids of 2**64-1" => valid.tap do |f|
        f.function((1 << 64) - 1, "Huge#id", "h.rb", int64_max)
        f.location((1 << 64) - 1, (1 << 64) - 1, int64_min)
        f.sample([(1 << 64) - 1], [1, 1, 1, 1], "thread id" => int64_min)
      end,
      "location without a line" => valid.tap do |f|
        f.raw(4, forge.message([1, 9]))
        f.sample([9], [2, 1, 2, 1])
      end,
      "no samples" => PprofForge::Builder.new.tap { |f| f.sample_type("cpu-time", "nanoseconds") },
      "nothing but the string table" => PprofForge::Builder.new,
      "no sample types" => PprofForge::Builder.new.tap do |f|
        f.function(1, "f", "f.rb")
        f.location(1, 1, 1)
        f.sample([1], [], "thread id" => 1)
      end,
      "a 5000-frame stack" => deep,
      "hostile names" => hostile,
      "duplicate ids" => valid.tap do |f|
        f.function(1, "Other#one", "o.rb")
        f.location(1, 2, 5)
      end,
      "unknown fields of every wire type" => valid.tap do |f|
        f.bytes(forge.tag(100, 0) + forge.varint(1) + forge.tag(101, 1) + ("\x00".b * 8) + forge.tag(102, 5) + ("\x00".b * 4))
        f.raw(103, "skipped")
      end,
    }.to_h { |name, builder| [name, builder.gzip] }
  end

  def setup
    @dir = Dir.mktmpdir("sonde-bad-profiles")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def write_case(name, bytes)
    path = File.join(@dir, "#{name.gsub(/[^a-z0-9]+/i, "-")}.pprof")
    File.binwrite(path, bytes)
    path
  end

  def cli(command, path)
    name = command.split.first
    argv = [name, path, *COMMANDS.fetch(command)]
    argv += ["-o", File.join(@dir, "out.html")] if name == "flamegraph"
    out = StringIO.new
    err = StringIO.new
    code = begin
      Sonde::CLI.run(argv, out: out, err: err)
    rescue Exception => e # rubocop:disable Lint/RescueException -- any escape is the failure this test looks for
      flunk "#{command} #{path}: #{e.class} escaped: #{e.message}\n#{e.backtrace.first(8).join("\n")}"
    end
    [code, out.string, err.string]
  end

  def assert_file_error(command, path, code, out, err, pattern, what)
    prefix = "sonde #{command.split.first}: #{path}: "
    assert_equal 1, code, "#{what} / #{command}: exit 1 expected, got #{code}: #{err}"
    assert_equal "", out, "#{what} / #{command}: nothing on stdout"
    assert_equal 1, err.lines.size, "#{what} / #{command}: one line:\n#{err}"
    assert err.start_with?(prefix), "#{what} / #{command}: names the file: #{err}"
    assert_match pattern, err, "#{what} / #{command}: says what is wrong"
    refute_match(/:\d+:in `/, err, "#{what} / #{command}: no backtrace")
  end

  def test_corrupt_profiles_to_every_command
    checked = 0
    self.class.corrupt_cases.each do |name, (bytes, pattern)|
      path = write_case(name, bytes)
      COMMANDS.each_key do |command|
        code, out, err = cli(command, path)
        assert_file_error(command, path, code, out, err, pattern, name)
        checked += 1
      end
    end
    SondeStress.record("bad input corrupt profiles", files: self.class.corrupt_cases.size, command_runs: checked)
  end

  def test_files_that_are_not_profiles_at_all
    {
      File.join(@dir, "missing.pprof") => /no such file/,
      @dir => /is a directory/,
      "/dev/zero" => /a device, not a file/,
      "/dev/urandom" => /a device, not a file/,
      "/dev/null" => /a device, not a file/,
    }.each do |path, pattern|
      next unless path.start_with?(@dir) || File.exist?(path)

      COMMANDS.each_key do |command|
        code, out, err = cli(command, path)
        assert_file_error(command, path, code, out, err, pattern, path)
      end
    end
  end

  # A pipe (sonde report <(zcat x.pprof.gz), /dev/stdin) is read like a file.
  def test_a_pipe
    report = lambda do |bytes|
      Open3.capture3(RbConfig.ruby, "-I#{SondeStress::LIB}", EXE, "report", "/dev/stdin", stdin_data: bytes, binmode: true)
    end
    stdout, stderr, status = report.call(self.class.valid.gzip)
    assert_equal [0, ""], [status.exitstatus, stderr]
    assert_match(/\ACPU time: 15\.0 ms in 2 samples/, stdout)
    stdout, stderr, status = report.call(Random.new(3).bytes(5000))
    assert_equal [1, ""], [status.exitstatus, stdout]
    assert_equal 1, stderr.lines.size, stderr
    assert stderr.start_with?("sonde report: /dev/stdin: not a pprof profile: "), stderr
  end

  def test_odd_but_valid_profiles_are_read_by_every_command
    self.class.odd_cases.each do |name, bytes|
      path = write_case(name, bytes)
      COMMANDS.each_key do |command|
        code, out, err = cli(command, path)
        if name.match?(/\Ano sample types|\Anothing but/) && command == "convert collapsed"
          assert_file_error(command, path, code, out, err, /the profile has no sample types to convert/, name)
          next
        end
        if name.match?(/\Ano sample types|\Anothing but/) && command.start_with?("report")
          assert_file_error(command, path, code, out, err, /nothing to show: .*, and no sample types at all$/, name)
          next
        end
        assert_equal 0, code, "#{name} / #{command}: #{err}"
        assert_equal command.start_with?("flamegraph") ? "sonde: wrote #{File.join(@dir, "out.html")}\n" : "", err,
                     "#{name} / #{command}"
        JSON.parse(out) if command == "convert speedscope"
      end
    end
  end

  def test_odd_values_are_shown_sensibly
    path = write_case("all negative", self.class.odd_cases.fetch("all values negative"))
    _, out, = cli("report", path)
    assert_match(/CPU time: -5 ns in 1 sample\b/, out)
    path = write_case("extremes", self.class.odd_cases.fetch("int64 extremes"))
    _, out, = cli("convert collapsed", path)
    # Sums past int64 stay exact.
    assert_includes out, "(unknown thread);<main>;Object#work #{4 * ((1 << 63) - 1)}\n"
    path = write_case("numeric names", self.class.odd_cases.fetch("numeric thread name, string thread id, numeric state"))
    _, out, = cli("convert collapsed", path)
    assert_includes out, "7;Object#work 1\n"
  end

  # File names that are not valid UTF-8 or that hold HTML: a page title and
  # a speedscope name must still come out as valid text.
  def test_hostile_file_names
    bytes = self.class.valid.gzip
    ["\xFFlatin1-\xE9.pprof".b, "<b>&\"'.pprof", "with space;semicolon.pprof", "-starts-with-dash.pprof"].each do |name|
      path = File.join(@dir, name)
      File.binwrite(path, bytes)
      argv_path = path.dup.force_encoding(Encoding::UTF_8) # as ARGV gives it under a UTF-8 locale
      COMMANDS.each_key do |command|
        code, out, err = cli(command, argv_path)
        assert_equal 0, code, "#{name.inspect} / #{command}: #{err}"
        JSON.parse(out) if command == "convert speedscope"
      end
      page = File.binread(File.join(@dir, "out.html")).force_encoding(Encoding::UTF_8)
      assert page.valid_encoding?, "#{name.inspect}: the page is valid UTF-8"
      refute_includes page, "<b>&", "#{name.inspect}: the title is escaped"
    end
    code, _, err = cli("report", "#{@dir}/\xFFmissing.pprof".b.force_encoding(Encoding::UTF_8))
    assert_equal 1, code
    assert_match(/no such file/, err.b)
  end

  # Options matched against names in the profile must be text: one usage line.
  def test_option_values_that_are_not_text
    path = write_case("valid", self.class.valid.gzip)
    bad = "\xFF".dup.force_encoding(Encoding::UTF_8)
    [%W[report #{path} --focus #{bad}], %W[report #{path} --ignore #{bad}], %W[report #{path} --function #{bad}],
     %W[convert #{path} --to collapsed --sample #{bad}], %W[flamegraph #{path} --title #{bad}]].each do |argv|
      err = StringIO.new
      code = Sonde::CLI.run(argv, out: StringIO.new, err: err)
      assert_equal 2, code, argv.inspect
      assert_equal 1, err.string.lines.size, err.string
      assert_match(/: "\\xFF" is not valid UTF-8 text \(usage: /, err.string)
    end
  end

  # The same through the real executable: exit status, one line, no backtrace.
  def test_through_the_executable
    corrupt = self.class.corrupt_cases
    names = SondeStress.full? ? corrupt.keys : ["random bytes", "varint over 64 bits", "label string out of range"]
    runs = 0
    names.each do |name|
      bytes, pattern = corrupt.fetch(name)
      path = write_case(name, bytes)
      COMMANDS.each do |command, options|
        cmd, = command.split
        argv = [cmd, path, *options]
        argv += ["-o", File.join(@dir, "exe.html")] if cmd == "flamegraph"
        stdout, stderr, status = SondeStress.run_ruby(EXE, *argv, timeout: 60)
        assert_file_error(command, path, status.exitstatus, stdout, stderr, pattern, "#{name} (exe/sonde)")
        runs += 1
      end
    end
    odd = self.class.odd_cases
    (SondeStress.full? ? odd.keys : ["numeric thread name, string thread id, numeric state", "hostile names"]).each do |name|
      path = write_case(name, odd.fetch(name))
      %w[report flamegraph].each do |cmd|
        argv = [cmd, path]
        argv += ["-o", File.join(@dir, "exe.html")] if cmd == "flamegraph"
        _stdout, stderr, status = SondeStress.run_ruby(EXE, *argv, timeout: 60)
        assert_equal 0, status.exitstatus, "#{name} / #{cmd}: #{stderr}"
        runs += 1
      end
    end
    SondeStress.record("bad input through exe/sonde", runs: runs)
  end
end
