# frozen_string_literal: true

require_relative "support/test_helper"
require_relative "support/command_test_helper"
require "stringio"
require "sonde/convert"
require "sonde/cli/convert_command"
require "support/derived_fixture"
require "support/allocation_fixture"
require "support/node_deps"

class ConvertTest < Minitest::Test
  MS = DerivedFixture::MS

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
  end

  def convert(**options)
    Sonde::Convert.new(DerivedFixture.profile, **options).write(StringIO.new).string
  end

  def test_collapsed_cpu_by_default_one_line_per_stack_and_thread
    assert_equal [
      "main;main;work #{30 * MS}",
      "main;main;work;helper #{10 * MS}",
      "worker;main;recurse;recurse #{50 * MS}"
    ], convert(to: :collapsed).lines.map(&:chomp)
  end

  def test_collapsed_wall_keeps_zero_cpu_stacks
    lines = convert(to: :collapsed, sample: "wall").lines.map(&:chomp)
    assert_includes lines, "main;main;Kernel#sleep #{200 * MS}"
    assert_includes lines, "worker;main;recurse;helper #{10 * MS}"
    assert_equal DerivedFixture::WALL, lines.sum { |line| line.split.last.to_i }
  end

  def test_collapsed_without_thread_names_merges_threads
    lines = convert(to: :collapsed, sample: "wall-samples", thread_names: false).lines.map(&:chomp)
    assert_equal ["main;Kernel#sleep 20", "main;recurse;helper 1", "main;recurse;recurse 10", "main;work 4",
                  "main;work;helper 1"], lines
  end

  def test_collapsed_names_cannot_break_the_format
    f = PprofFixture::Builder.new
    f.sample_type("cpu-time", "nanoseconds")
    f.sample([f.frame("a;b\nc", "x.rb", line: 1)], [5], "thread name" => "t;1")
    out = Sonde::Convert.new(Sonde::Pprof.decode(f.encode), to: :collapsed).write(StringIO.new).string
    assert_equal "t_1;a_b_c 5\n", out
  end

  def test_speedscope_one_sampled_profile_per_thread_and_type
    file = JSON.parse(convert(to: :speedscope, name: "app.pprof"))
    assert_equal "https://www.speedscope.app/file-format-schema.json", file["$schema"]
    assert_equal "app.pprof", file["name"]
    names = file["profiles"].map { |p| p["name"] }
    assert_equal ["worker (cpu-time)", "main (cpu-time)", "main (wall-time)", "worker (wall-time)"], names
    frames = file["shared"]["frames"]
    assert_includes frames, { "name" => "work", "file" => "app.rb", "line" => 10 }
    assert_includes frames, { "name" => "Kernel#sleep" }
    main_wall = file["profiles"][2]
    assert_equal "sampled", main_wall["type"]
    assert_equal "nanoseconds", main_wall["unit"]
    assert_equal 250 * MS, main_wall["endValue"]
    assert_equal 250 * MS, main_wall["weights"].sum
    stacks = main_wall["samples"].map { |stack| stack.map { |i| frames[i]["name"] } }
    assert_includes stacks, %w[main Kernel#sleep], "stacks are root first"
  end

  def test_speedscope_one_type
    file = JSON.parse(convert(to: :speedscope, sample: "wall-samples"))
    assert_equal ["main (wall-samples)", "worker (wall-samples)"], file["profiles"].map { |p| p["name"] }
    assert_equal ["none"], file["profiles"].map { |p| p["unit"] }.uniq
  end

  def test_collapsed_led_by_a_label
    f = PprofFixture::Builder.new
    f.sample_type("cpu-time", "nanoseconds")
    work = f.frame("work", "app.rb", line: 3)
    f.sample([work], [5], "thread id" => 1, "thread name" => "puma 1", "endpoint" => "GET /users")
    f.sample([work], [7], "thread id" => 2, "thread name" => "puma 2", "endpoint" => "GET /users")
    f.sample([work], [11], "thread id" => 1, "thread name" => "puma 1", "endpoint" => "POST /orders")
    f.sample([work], [13], "thread id" => 1, "thread name" => "puma 1")
    profile = Sonde::Pprof.decode(f.encode)
    lines = Sonde::Convert.new(profile, to: :collapsed, label: "endpoint").write(StringIO.new).string.lines(chomp: true)
    assert_equal ["(no endpoint);puma 1;work 13", "GET /users;puma 1;work 5", "GET /users;puma 2;work 7",
                  "POST /orders;puma 1;work 11"], lines
    lines = Sonde::Convert.new(profile, to: :collapsed, label: "endpoint", thread_names: false)
                          .write(StringIO.new).string.lines(chomp: true)
    assert_equal ["(no endpoint);work 13", "GET /users;work 12", "POST /orders;work 11"], lines
    error = assert_raises(Sonde::ArgumentError) { Sonde::Convert.new(profile, to: :collapsed, label: "tenant") }
    assert_equal 'label: "tenant" is on no sample (this profile\'s labels: endpoint, thread id, thread name)', error.message
    error = assert_raises(Sonde::ArgumentError) { Sonde::Convert.new(profile, to: :speedscope, label: "endpoint") }
    assert_match(/only collapsed stacks lead by a label/, error.message)
  end

  def convert_allocations(**options)
    Sonde::Convert.new(AllocationFixture.profile, **options).write(StringIO.new).string
  end

  # alloc and heap stand for alloc-samples and heap-live-size, as cpu and
  # wall for cpu-time and wall-time; values are object counts and bytes.
  def test_collapsed_allocations_and_heap
    allocations = ["main;main;make_foos 1000000", "main;main;make_foos;format_name 600000",
                   "worker;main;recurse;make_bars 400000"]
    assert_equal allocations, convert_allocations(to: :collapsed, sample: "alloc").lines(chomp: true)
    assert_equal allocations, convert_allocations(to: :collapsed, sample: "alloc-samples").lines(chomp: true)
    heap = ["main;main;make_foos #{48 * AllocationFixture::MB}", "worker;main;recurse;make_bars #{16 * AllocationFixture::MB}"]
    assert_equal heap, convert_allocations(to: :collapsed, sample: "heap").lines(chomp: true)
    assert_equal heap, convert_allocations(to: :collapsed, sample: "heap-live-size").lines(chomp: true)
    assert_equal ["main;main;make_foos 200000", "worker;main;recurse;make_bars 100000"],
                 convert_allocations(to: :collapsed, sample: "heap-live-samples").lines(chomp: true)
    assert_equal ["main;main;work #{30 * MS}", "worker;main;recurse #{50 * MS}"],
                 convert_allocations(to: :collapsed).lines(chomp: true), "cpu-time by default"
  end

  def test_collapsed_allocations_led_by_their_class
    assert_equal ["(VM internal);main;recurse;make_bars 100000", "Bar;main;recurse;make_bars 300000",
                  "Foo;main;make_foos 1000000", "String;main;make_foos;format_name 600000"],
                 convert_allocations(to: :collapsed, sample: "alloc", label: "allocation class", thread_names: false)
                   .lines(chomp: true)
  end

  # speedscope's units: "none" for counts, "bytes" for bytes. By default
  # every view the profile has, each thread's own profile.
  def test_speedscope_allocations_and_heap
    file = JSON.parse(convert_allocations(to: :speedscope))
    assert_equal [["worker (cpu-time)", "nanoseconds", 50 * MS], ["main (cpu-time)", "nanoseconds", 30 * MS],
                  ["worker (wall-time)", "nanoseconds", 100 * MS], ["main (wall-time)", "nanoseconds", 40 * MS],
                  ["main (alloc-samples)", "none", 1_600_000], ["worker (alloc-samples)", "none", 400_000],
                  ["main (heap-live-size)", "bytes", 48 * AllocationFixture::MB],
                  ["worker (heap-live-size)", "bytes", 16 * AllocationFixture::MB]],
                 file["profiles"].map { |p| [p["name"], p["unit"], p["weights"].sum] }
    %w[heap heap-live-size].each do |sample|
      file = JSON.parse(convert_allocations(to: :speedscope, sample: sample))
      assert_equal [["main (heap-live-size)", "bytes"], ["worker (heap-live-size)", "bytes"]],
                   file["profiles"].map { |p| [p["name"], p["unit"]] }
    end
    file = JSON.parse(convert_allocations(to: :speedscope, sample: "heap-live-samples"))
    assert_equal [["main (heap-live-samples)", "none", 200_000], ["worker (heap-live-samples)", "none", 100_000]],
                 file["profiles"].map { |p| [p["name"], p["unit"], p["endValue"]] }
    frames = file["shared"]["frames"]
    main_stacks = file["profiles"][0]["samples"].map { |stack| stack.map { |i| frames[i]["name"] } }
    assert_equal [%w[main make_foos]], main_stacks
  end

  # The shorthands are offered for the types the profile has, and only those.
  def test_allocation_shorthands_need_their_types
    error = assert_raises(Sonde::ArgumentError) { convert(to: :collapsed, sample: "alloc") }
    assert_equal 'sample: "alloc" is not accepted (this profile has: cpu-time, cpu-samples, wall-time, wall-samples, ' \
                 "cpu, wall)", error.message
    error = assert_raises(Sonde::ArgumentError) { convert_allocations(to: :collapsed, sample: "gpu") }
    assert_match(/this profile has: .*heap-live-size, cpu, wall, alloc, heap\)/, error.message)
  end

  def test_rejects_unknown_sample_type_and_format
    error = assert_raises(Sonde::ArgumentError) { convert(to: :collapsed, sample: "gpu") }
    assert_match(/sample: "gpu" is not accepted \(this profile has: cpu-time, cpu-samples, wall-time, wall-samples/,
                 error.message)
    error = assert_raises(Sonde::ArgumentError) { convert(to: :json) }
    assert_match(/to: :json is not accepted \(expected one of :collapsed, :speedscope, :firefox\)/, error.message)
  end
end

class ConvertCommandTest < Minitest::Test
  include CommandTestHelper

  COMMAND = Sonde::CLI::ConvertCommand
  COMMAND_NAME = "convert"

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
    @dir = Dir.mktmpdir("sonde-convert")
    @file = File.join(@dir, "app.pprof")
    File.binwrite(@file, DerivedFixture.bytes)
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_collapsed_to_stdout
    code, out, err = run_command(@file, "--to", "collapsed", "--sample", "cpu")
    assert_equal [0, ""], [code, err]
    assert_equal 3, out.lines.size
  end

  def test_speedscope_to_file
    output = File.join(@dir, "app.speedscope.json")
    code, out, err = run_command(@file, "--to", "speedscope", "-o", output)
    assert_equal [0, ""], [code, out]
    assert_equal "sonde: wrote #{output}\n", err
    assert_equal 4, JSON.parse(File.read(output))["profiles"].size
  end

  def test_allocations_and_heap
    File.binwrite(@file, AllocationFixture.bytes)
    code, out, err = run_command(@file, "--to", "collapsed", "--sample", "alloc", "--no-thread-names")
    assert_equal [0, ""], [code, err]
    assert_equal ["main;make_foos 1000000", "main;make_foos;format_name 600000", "main;recurse;make_bars 400000"],
                 out.lines(chomp: true)
    code, out, = run_command(@file, "--to", "speedscope", "--sample", "heap")
    assert_equal 0, code
    assert_equal %w[bytes bytes], JSON.parse(out)["profiles"].map { |p| p["unit"] }
  end

  def test_help_names_the_shorthands
    code, out, = run_command("--help")
    assert_equal 0, code
    assert_match(/cpu, wall, alloc, heap for\s+cpu-time, wall-time, alloc-samples, heap-live-size/, out)
  end

  def test_through_the_sonde_executable
    stdout, stderr, status = run_sonde("convert", @file, "--to", "collapsed", "--no-thread-names")
    assert_succeeded status, stderr
    assert_match(/\Amain;recurse;recurse 50000000$/, stdout.lines.grep(/recurse;recurse/).first)
  end

  # A real profile of two labelled endpoints: each one's lines add up to the
  # CPU time of the samples that carry it.
  def test_collapsed_by_endpoint_of_a_real_profile
    require_relative "support/exporter_test_helpers"
    File.binwrite(@file, ExporterTestHelpers.labelled_pprof_bytes)
    code, out, err = run_command(@file, "--to", "collapsed", "--label", "endpoint")
    assert_equal [0, ""], [code, err]
    by_endpoint = out.lines.group_by { |line| line.split(";").first }
                     .transform_values { |lines| lines.sum { |line| line.split.last.to_i } }
    profile = Sonde::Pprof.decode(ExporterTestHelpers.labelled_pprof_bytes)
    cpu = profile.value_index("cpu-time")
    expected = profile.samples.group_by { |sample| sample.labels.fetch("endpoint", "(no endpoint)") }
                      .transform_values { |samples| samples.sum { |sample| sample.values[cpu] } }
                      .reject { |_endpoint, value| value.zero? }
    assert_equal expected, by_endpoint
    assert_equal ["(no endpoint)", "GET /users", "POST /orders"], by_endpoint.keys.sort
  end

  def test_usage_errors
    {
      [@file] => /missing --to \(collapsed, speedscope or firefox\)/,
      [@file, "--to", "svg"] => /--to: "svg" is not accepted \(expected collapsed, speedscope or firefox\)/,
      [@file, "--to", "collapsed", "--sample", "gpu"] => /--sample: "gpu" is not accepted \(this profile has: /,
      [@file, "--to", "collapsed", "--label", "endpoint"] => /--label: "endpoint" is on no sample \(this profile's labels: /,
      [@file, "--to", "speedscope", "--label", "state"] => /--label: only collapsed stacks lead by a label/,
      ["--to", "collapsed"] => /missing FILE/,
      [@file, "--frobnicate"] => /unknown option --frobnicate/
    }.each do |argv, pattern|
      code, out, err = run_command(*argv)
      assert_equal 2, code, argv.inspect
      assert_equal "", out
      assert_one_line_error(err, pattern)
    end
  end

  def test_malformed_inputs
    DerivedFixture.malformed(@dir).merge(File.join(@dir, "missing.pprof") => /no such file/, @dir => /is a directory\n\z/)
                  .each do |path, message|
      # convert takes one file: a directory's error offers no glob.
      code, out, err = run_command(path, "--to", "collapsed")
      assert_equal 1, code, path
      assert_equal "", out
      assert_one_line_error(err, /\Asonde convert: #{Regexp.escape(path)}: .*#{message.source}/)
    end
  end

  def test_malformed_input_through_the_executable_has_no_backtrace
    path = DerivedFixture.malformed(@dir).keys.first
    stdout, stderr, status = run_sonde("convert", path, "--to", "speedscope")
    assert_equal 1, status.exitstatus
    assert_equal "", stdout
    assert_equal 1, stderr.lines.size, stderr
  end

  def test_unwritable_output
    code, _, err = run_command(@file, "--to", "collapsed", "-o", File.join(@dir, "no", "such", "dir.txt"))
    assert_equal 1, code
    assert_one_line_error(err, /cannot write .*dir\.txt: No such file or directory/)
  end

  include SondeTestHelper
end

# speedscope's own importer, in speedscope's own built app, opened the way its
# `speedscope FILE` command opens it, in headless Chromium: it must take both
# Sonde's speedscope file and the pprof file, and show the values we wrote.
class SpeedscopeImportTest < Minitest::Test
  include SondeTestHelper

  def setup
    skip "protoc is not installed" unless PprofFixture.protoc?
    @browser = NodeDeps.browser_or_skip(self)
    @dir = Dir.mktmpdir("sonde-speedscope")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_speedscope_imports_the_speedscope_file
    path = File.join(@dir, "app.speedscope.json")
    File.write(path, Sonde::Convert.new(DerivedFixture.profile, to: :speedscope, name: "app").write(+"").to_s)
    result = @browser.speedscope(path, dir: @dir)
    assert_empty result["errors"]
    assert_equal "app - speedscope", result["title"]
    assert_match(%r{worker \(cpu-time\) \(1/4\)}, result["text"])
    rows = result["sandwich"].to_h { |row| [row.last, row.first] }
    assert_equal "50.00ms (100%)", rows["recurse"], "speedscope's sandwich view of worker's CPU: #{result["sandwich"]}"
  end

  # speedscope reads our "bytes" unit as sizes: its sandwich view shows MB.
  def test_speedscope_imports_heap_sizes
    path = File.join(@dir, "heap.speedscope.json")
    File.write(path, Sonde::Convert.new(AllocationFixture.profile, to: :speedscope, sample: "heap", name: "heap")
                                   .write(+"").to_s)
    result = @browser.speedscope(path, dir: @dir)
    assert_empty result["errors"]
    rows = result["sandwich"].to_h { |row| [row.last, row.first] }
    assert_equal "48.00 MB (100%)", rows["make_foos"], "speedscope's sandwich view of main's heap: #{result["sandwich"]}"
  end

  def test_speedscope_imports_the_pprof_file
    path = File.join(@dir, "app.pprof")
    File.binwrite(path, DerivedFixture.bytes)
    result = @browser.speedscope(path, dir: @dir)
    assert_empty result["errors"]
    assert_equal "app.pprof - speedscope", result["title"]
    names = result["sandwich"].map(&:last)
    %w[main work helper recurse].each { |name| assert_includes names, name }
  end
end
