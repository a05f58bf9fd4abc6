# frozen_string_literal: true

require_relative "support/test_helper"
require_relative "support/command_test_helper"
require_relative "stress/pprof_forge"
require "fileutils"
require "stringio"
require "sonde/cli"
require "sonde/report"

# Input bounded by input (issue 23, item 3): what `sonde report`,
# `flamegraph` and `convert` read is capped (Sonde::Pprof::Limits), each cap
# refused in one line that names it and its SONDE_READ_MAX_* variable; the
# gzip bombs of the issue (16 KB and 65 KB of one repeated sample) end in
# that line within 2 s and 200 MB. A Go-shaped profile without Sonde's
# sample types gets its own types named, and a non-zero exit; a 1 MB method
# name does not pad every report line.
class PprofLimitsTest < Minitest::Test
  include SondeTestHelper

  COMMANDS = {
    "report" => ->(file, _dir) { ["report", file] },
    "flamegraph" => ->(file, dir) { ["flamegraph", file, "-o", File.join(dir, "out.html")] },
    "convert" => ->(file, dir) { ["convert", file, "--to", "speedscope", "-o", File.join(dir, "out.json")] },
  }.freeze

  # The issue's bombs: gzip'd repetitions of one sample message, built to
  # the size the issue measured (16 KB took 2.4 GB and 55-74 s; 65 KB died
  # at 8 GB).
  BOMB_SIZES = { "16 KB" => 16 * 1024, "65 KB" => 65 * 1024 }.freeze
  SECONDS = 2
  RSS_KB = 200 * 1024

  def setup
    @dir = Dir.mktmpdir("sonde-limits")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the 16 KB bomb's size" -127 to -6 of ±1.64e+03; "report on
  # the 16 KB bomb" 0.05-0.36x its bound (<); "report on the 16 KB bomb" 0.17-0.22x its bound (<).
  statistical def test_the_gzip_bombs_are_refused_in_one_line_within_2_s_and_200_mb
    BOMB_SIZES.each do |name, size|
      file = File.join(@dir, "bomb-#{name.delete(" ")}.pprof")
      File.binwrite(file, sample_bomb(size))
      assert_in_delta size, File.size(file), size * 0.1, "the #{name} bomb's size"
      COMMANDS.each do |command, argv|
        err, seconds, peak_kb, status = run_measured(*argv.call(file, @dir))
        what = "#{command} on the #{name} bomb"
        assert_equal 1, status.exitstatus, "#{what}: #{err}"
        assert_equal 1, err.lines.size, "#{what}: #{err}"
        assert_match(/\Asonde #{command}: #{Regexp.escape(file)}: gzip data inflates more than 100 times .*SONDE_READ_MAX_INFLATE_RATIO=N$/,
                     err, what)
        assert_operator seconds, :<, SECONDS, "#{what}: #{seconds.round(2)} s"
        assert_operator peak_kb, :<, RSS_KB, "#{what}: peak RSS #{peak_kb} KB"
      end
    end
  end

  # With the ratio raised, the sample count cap stops the same bomb, still
  # in one line that names it (and measured: 1M samples, about 12 s here,
  # so the cap is lowered for the test).
  def test_each_count_cap_is_named_with_its_variable
    bomb = File.join(@dir, "bomb.pprof")
    File.binwrite(bomb, sample_bomb(16 * 1024))
    err = sonde_error("report", bomb, "SONDE_READ_MAX_INFLATE_RATIO" => "100000", "SONDE_READ_MAX_SAMPLES" => "50000")
    assert_match(/: profile too large: more than 50000 samples; raise the cap with SONDE_READ_MAX_SAMPLES=N$/,
                 err)

    standard = PprofForge::Builder.standard
    file = File.join(@dir, "standard.pprof")
    File.binwrite(file, standard.gzip)
    # Each cap one under the standard profile's own count.
    { "SONDE_READ_MAX_SAMPLES" => [2, "samples"], "SONDE_READ_MAX_LOCATIONS" => [1, "locations"],
      "SONDE_READ_MAX_FUNCTIONS" => [1, "functions"], "SONDE_READ_MAX_STRINGS" => [standard.strings.size - 1, "strings"],
      "SONDE_READ_MAX_FRAMES" => [4, "stack frames"], "SONDE_READ_MAX_LABELS" => [8, "labels"],
      "SONDE_READ_MAX_VALUES" => [11, "values"] }.each do |variable, (cap, what)|
      COMMANDS.each_key do |command|
        err = sonde_error(*COMMANDS.fetch(command).call(file, @dir), variable => cap.to_s)
        assert_match(/\Asonde #{command}: #{Regexp.escape(file)}: profile too large: more than #{cap} #{what}\b.*; raise the cap with #{variable}=N\n\z/,
                     err, "#{command} with #{variable}=#{cap}")
      end
      # At the profile's own count it is read.
      _out, err, status = run_sonde("report", file, env: { variable => (cap + 1).to_s })
      assert status.success?, "#{variable}=#{cap + 1}: #{err}"
    end
  end

  def test_a_cap_that_is_not_a_number_is_refused
    file = File.join(@dir, "standard.pprof")
    File.binwrite(file, PprofForge::Builder.standard.gzip)
    err = sonde_error("report", file, "SONDE_READ_MAX_SAMPLES" => "lots")
    assert_equal "sonde report: SONDE_READ_MAX_SAMPLES=\"lots\" is not accepted: expected a positive integer\n", err
  end

  def test_a_go_profile_gets_its_sample_types_named_and_a_non_zero_exit
    forge = PprofForge::Builder.new
    forge.sample_type("samples", "count")
    forge.sample_type("cpu", "nanoseconds")
    forge.function(1, "main.work", "main.go", 10)
    forge.location(1, 1, 12)
    forge.sample([1], [3, 30_000_000])
    file = File.join(@dir, "go.pprof")
    File.binwrite(file, forge.gzip)
    out, err, status = run_sonde("report", file)
    assert_equal [1, ""], [status.exitstatus, out]
    assert_equal "sonde report: #{file}: nothing to show: the profile has no cpu-time or wall-time samples; " \
                 "its sample types are samples/count, cpu/nanoseconds (sonde convert --sample TYPE reads any of them)\n",
                 err
    _out, err, status = run_sonde("report", file, "--sample", "alloc")
    assert_equal 1, status.exitstatus
    assert_includes err, "no alloc-samples samples (record them with `sonde record --alloc`"
    out, err, status = run_sonde("convert", file, "--to", "collapsed", "--sample", "samples")
    assert status.success?, err
    assert_equal "(unknown thread);main.work 3\n", out
  end

  def test_a_one_megabyte_method_name_does_not_pad_every_line
    forge = PprofForge::Builder.standard
    long = "M#{"x" * (1 << 20)}#huge"
    forge.function(3, long, "app.rb", 1)
    forge.location(3, 3, 2)
    forge.sample([3, 2], [1_000_000, 1, 1_000_000, 1], "thread id" => 1)
    file = File.join(@dir, "long.pprof")
    File.binwrite(file, forge.gzip)
    out, err, status = run_sonde("report", file)
    assert status.success?, err
    width = 120 # Sonde::Report::Table::MAX_TEXT_WIDTH
    line = out.lines.find { |l| l.include?("Mxxx") }
    assert_includes line, "#{"x" * 20}...", "the name is cut with an ellipsis"
    # A table line: four numbers, the name cut to its width, a location.
    assert_operator out.lines.map(&:length).max, :<, width + 80, "the longest line"
    assert_operator out.bytesize, :<, 20_000, "the whole report"
  end

  private

  # Gzip of one sample message repeated until the gzip is about `size`
  # (the ratio measured on a first try, then scaled).
  def sample_bomb(size)
    sample = PprofForge.field(2, PprofForge.message([1, PprofForge.packed([1])], [2, PprofForge.packed([1])]))
    trial = 1 << 20
    ratio = (sample.bytesize * trial).fdiv(Zlib.gzip(sample * trial, level: 9).bytesize)
    Zlib.gzip(sample * (size * ratio / sample.bytesize).round, level: 9)
  end

  def sonde_error(*argv, env)
    out, err, status = run_sonde(*argv, env: env)
    assert_equal [1, ""], [status.exitstatus, out], err
    err
  end

  # [stderr, seconds, peak RSS in KB, status] of exe/sonde ARGV, the peak
  # read by the child itself (VmHWM) as it exits.
  def run_measured(*argv)
    script = 'at_exit { $stderr.print "\nVmHWM=#{File.read("/proc/self/status")[/VmHWM:\s+(\d+)/, 1]}" }; load ARGV.shift'
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    _out, err, status = run_ruby("-e", script, EXE, *argv)
    seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    peak = Integer(err[/\nVmHWM=(\d+)\z/, 1])
    [err.sub(/\nVmHWM=\d+\z/, ""), seconds, peak, status]
  end
end
