# frozen_string_literal: true

require_relative "stress_helper"
require_relative "pprof_forge"
require "fileutils"
require "io/wait"

# Fuzzing the profile reader (tracker issue 7, case 7). Proves that no byte
# string makes `sonde report`, `sonde convert` or `sonde flamegraph` crash or
# hang: real profiles made by Sonde (threads with IO and sleeps, a deep
# recursion cut by max_frames, odd method names, GC, a continuous-mode file
# with comments) are mutated (bit flips, interesting bytes, byte inserts and
# deletes, truncation, splices, duplicated chunks, runs of 0xff, on the raw
# protobuf, gzip'd again or not, and on the gzip'd bytes) and each input goes
# through what those commands do in-process (Sonde::Pprof.decode, the report
# in four shapes, --function, collapsed, speedscope, the flame graph page).
# Every input must render or raise a documented error (Sonde::Pprof::
# DecodeError; Sonde::Convert::ProfileError or Sonde::ArgumentError where
# the commands turn them into one line): never NoMethodError, TypeError,
# RangeError, NoMemoryError, SystemStackError or a hang. Each input gets 2 s
# (Timeout in the worker; a watchdog in this process kills a worker stuck
# with the GVL held); a crash or hang is saved with its seed and number
# (with the corpus it came from) under tmp/stress/fuzz-findings/ and
# /tmp/sonde-findings/fuzz/. 60 s under
# SONDE_STRESS=full, 10 s otherwise. A sample of inputs also goes through
# exe/sonde: exit 0, or 1 with one line naming the file, no backtrace.
class FuzzTest < Minitest::Test
  include SondeTestHelper

  SECONDS = SondeStress.size(10, 60)
  PER_INPUT_SECONDS = 2
  # The worker's own Timeout fires first; this catches a hang in C code.
  WATCHDOG_SECONDS = PER_INPUT_SECONDS + 4
  CLI_SAMPLE = SondeStress.size(4, 16)
  FORGE = File.expand_path("pprof_forge.rb", __dir__)
  FINDINGS = [File.join(SondeStress::ROOT, "tmp", "stress", "fuzz-findings"), "/tmp/sonde-findings/fuzz"].freeze

  # Profiles a few workloads and writes each gzip'd pprof into ARGV[0].
  CORPUS_SCRIPT = <<~'RUBY'
    require "sonde"
    dir = ARGV[0]
    def spin(seconds)
      finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      x = 0
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish
      x
    end
    Sonde.profile(out: File.join(dir, "threads.pprof"), rate: 1000) do
      threads = Array.new(4) do |i|
        Thread.new do
          Thread.current.name = "worker-#{i}"
          reader, writer = IO.pipe
          5.times { spin(0.01); writer.write("x" * 100); reader.read(100); sleep 0.01 }
        end
      end
      threads.each(&:join)
    end
    def recurse(depth) = depth.zero? ? spin(0.1) : recurse(depth - 1)
    Sonde.profile(out: File.join(dir, "deep.pprof"), rate: 1000, max_frames: 64) { recurse(200) }
    class Ünïcode
      def méthode = spin(0.03)
      def <=>(_other) = spin(0.03)
      def [](_index) = spin(0.03)
    end
    anonymous = Class.new { def anonymous = spin(0.03) }
    eval("def from_eval = spin(0.03)", TOPLEVEL_BINDING, "we;ird\n<script>\u202e.rb", 1) # rubocop:disable Security/Eval
    Sonde.profile(out: File.join(dir, "names.pprof"), rate: 1000) do
      object = Ünïcode.new
      object.méthode
      _ = object <=> object
      object[0]
      anonymous.new.anonymous
      from_eval
    end
    Sonde.profile(out: File.join(dir, "gc.pprof"), rate: 1000) { 20.times { Array.new(50_000) { "s" * 10 }; GC.start } }
    Sonde.start(continuous: true, every: 1, export: "dir:#{File.join(dir, "continuous")}", service: "fuzz",
                tags: { "team" => "stress" })
    spin(1.3)
    Sonde.stop
  RUBY

  # Runs inputs seed/first.. until the deadline; prints "S i" before each
  # input and "R i RESULT" after, then "D".
  WORKER_SCRIPT = <<~'RUBY'
    require ARGV[0]
    require "timeout"
    PprofForge::Target.load
    corpus = Marshal.load(File.binread(ARGV[1]))
    seed, index = Integer(ARGV[2]), Integer(ARGV[3])
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[4])
    timeout = Float(ARGV[5])
    mutator = PprofForge::Mutator.new(corpus)
    $stdout.sync = true
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      bytes, = mutator.input(seed, index)
      puts "S #{index}"
      result = begin
        Timeout.timeout(timeout) { PprofForge::Target.exercise(bytes) }.to_s
      rescue Timeout::Error
        "hang"
      rescue Exception => e # rubocop:disable Lint/RescueException -- anything else is the finding
        where = e.backtrace&.find { |line| line.include?("/lib/sonde/") } || e.backtrace&.first
        "crash #{e.class} at #{where}: #{e.message[0, 200].inspect}"
      end
      puts "R #{index} #{result}"
      index += 1
    end
    puts "D #{index}"
  RUBY

  def setup
    @dir = Dir.mktmpdir("sonde-fuzz")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def make_corpus
    corpus_dir = File.join(@dir, "corpus")
    FileUtils.mkdir_p(corpus_dir)
    _stdout, stderr, status = SondeStress.run_ruby("-e", CORPUS_SCRIPT, corpus_dir, timeout: 120)
    assert status.success?, "making the corpus failed:\n#{stderr}"
    files = Dir[File.join(corpus_dir, "**", "*.pprof")].sort
    assert_operator files.size, :>=, 5, "expected at least 5 real profiles, got #{files}"
    corpus = files.map { |path| File.binread(path) }
    corpus.each_with_index { |bytes, i| Sonde::Pprof.decode(bytes) || flunk("corpus #{files[i]} must decode") }
    corpus << PprofForge::Builder.standard.gzip
  end

  # One worker run; returns the index to go on from and whether time is up.
  def run_worker(corpus_path, seed, first, seconds, tally)
    argv = [RbConfig.ruby, "-I#{SondeStress::LIB}", "-e", WORKER_SCRIPT, FORGE, corpus_path, seed.to_s, first.to_s,
            seconds.to_s, PER_INPUT_SECONDS.to_s]
    Open3.popen3(*argv) do |stdin, stdout, stderr, wait|
      stdin.close
      errors = Thread.new { stderr.read }
      current = nil
      loop do
        unless stdout.wait_readable(WATCHDOG_SECONDS)
          Process.kill(:KILL, wait.pid)
          wait.join
          tally[:findings] << [:hang, seed, current, "no answer in #{WATCHDOG_SECONDS} s (killed)"]
          return [current + 1, false]
        end
        line = stdout.gets
        if line.nil?
          status = wait.value
          tally[:findings] << [:crash, seed, current, "worker died: #{status.inspect}: #{errors.value[-500..]}"]
          return [current + 1, false]
        end
        case line
        when /\AS (\d+)$/ then current = Regexp.last_match(1).to_i
        when /\AR (\d+) (\w+) ?(.*)$/
          index = Regexp.last_match(1).to_i
          result = Regexp.last_match(2)
          tally[:tried] += 1
          tally[result.to_sym] += 1
          tally[:rendered_indexes] << [seed, index] if result == "rendered" && tally[:rendered_indexes].size < 200
          tally[:rejected_indexes] << [seed, index] if result == "rejected" && tally[:rejected_indexes].size < 200
          tally[:findings] << [result.to_sym, seed, index, Regexp.last_match(3)] if %w[hang crash].include?(result)
        when /\AD (\d+)$/
          wait.join
          return [Regexp.last_match(1).to_i, true]
        end
      end
    end
  end

  # The input itself, what happened, and the corpus it was made from (the
  # corpus is made afresh by each run, so (seed, index) alone is not enough).
  def save_finding(mutator, corpus, kind, seed, index, detail)
    bytes, description = mutator.input(seed, index)
    name = "#{kind}-seed#{seed}-input#{index}"
    FINDINGS.each do |dir|
      FileUtils.mkdir_p(dir)
      File.binwrite(File.join(dir, "#{name}.pprof"), bytes)
      File.binwrite(File.join(dir, "corpus-seed#{seed}.bin"), Marshal.dump(corpus))
      File.write(File.join(dir, "#{name}.txt"), <<~TEXT)
        #{kind}: #{detail}
        mutation: #{description}
        input: #{name}.pprof (try: exe/sonde report #{name}.pprof)
        remake: PprofForge::Mutator.new(Marshal.load(File.binread("corpus-seed#{seed}.bin"))).input(#{seed}, #{index})
      TEXT
    end
    "#{name} (#{description}): #{detail}"
  end

  def test_mutated_profiles_render_or_fail_cleanly
    corpus = make_corpus
    corpus_path = File.join(@dir, "corpus.bin")
    File.binwrite(corpus_path, Marshal.dump(corpus))
    mutator = PprofForge::Mutator.new(corpus)
    seed = Integer(ENV.fetch("SONDE_FUZZ_SEED") { Random.new_seed % 1_000_000 })
    tally = Hash.new(0).merge(findings: [], rendered_indexes: [], rejected_indexes: [])
    started = SondeStress.now
    index = 0
    loop do
      left = SECONDS - (SondeStress.now - started)
      break if left <= 0.5

      index, done = run_worker(corpus_path, seed, index, left, tally)
      break if done
    end
    seconds = SondeStress.now - started
    findings = tally[:findings].map { |kind, s, i, detail| save_finding(mutator, corpus, kind, s, i, detail) }
    cli_runs = cli_sample(mutator, tally)
    SondeStress.record("fuzz", seed: seed, seconds: seconds.round(1), inputs: tally[:tried], rendered: tally[:rendered],
                               rejected: tally[:rejected], crashes: tally[:crash], hangs: tally[:hang], cli_runs: cli_runs,
                               corpus: corpus.size)
    assert_empty findings, "fuzzing found crashes or hangs (seed #{seed}; SONDE_FUZZ_SEED=#{seed} repeats it):\n" \
                           "#{findings.first(20).join("\n")}"
    assert_operator tally[:tried], :>=, SondeStress.size(200, 1000), "too few inputs tried in #{seconds.round(1)} s"
    assert_operator tally[:rendered], :>, 0, "no mutated input was readable: the mutations are too coarse"
  end

  # Inputs of the run through the real executable.
  def cli_sample(mutator, tally)
    picks = tally[:rendered_indexes].first(CLI_SAMPLE / 2) + tally[:rejected_indexes].first(CLI_SAMPLE - (CLI_SAMPLE / 2))
    runs = 0
    picks.each do |seed, index|
      bytes, description = mutator.input(seed, index)
      path = File.join(@dir, "cli-#{seed}-#{index}.pprof")
      File.binwrite(path, bytes)
      [%w[report], %w[convert --to collapsed], ["flamegraph", "-o", File.join(@dir, "cli.html")]].each do |command, *options|
        stdout, stderr, status = SondeStress.run_ruby(EXE, command, path, *options, timeout: 60)
        what = "sonde #{command} on input #{seed}/#{index} (#{description})"
        runs += 1
        refute_match(/:\d+:in `/, stderr, "#{what}: no backtrace")
        if status.exitstatus == 1
          assert_equal "", stdout, what
          assert_equal 1, stderr.lines.size, "#{what}: one line:\n#{stderr}"
          assert stderr.start_with?("sonde #{command}: #{path}: "), "#{what}: names the file: #{stderr}"
        else
          assert_equal 0, status.exitstatus, "#{what}: #{stderr}"
        end
      end
    end
    runs
  end
end

# The crashes fuzzing found (with the HEAD of 2026-12-01, before the fixes),
# kept as small forged inputs that reproduce each one through the fuzz
# target: each must now render or raise a documented error.
class FuzzRegressionTest < Minitest::Test
  def setup
    PprofForge::Target.load
  end

  def standard_with
    PprofForge::Builder.standard.tap { |forge| yield forge }.gzip
  end

  # A label whose key or str index is 2**63 or more: Array#[] raised
  # RangeError (bignum too big to convert into `long') in sample_labels.
  def test_label_string_index_past_int64
    [[(1 << 64) - 1, 0], [1, 1 << 63], [(1 << 63) + 5, 1]].each do |key, str|
      bytes = standard_with do |forge|
        label = PprofForge.message([1, key], str.zero? ? [3, 5] : [2, str])
        forge.raw(2, PprofForge.message([1, PprofForge.packed([1])], [2, PprofForge.packed([1, 1, 1, 1])], [3, label]))
      end
      error = assert_raises(Sonde::Pprof::DecodeError) { Sonde::Pprof.decode(bytes) }
      assert_match(/a label of sample 4 refers to string \d+, but the string table has \d+/, error.message)
      assert_equal :rejected, PprofForge::Target.exercise(bytes)
    end
  end

  # A profile with no sample types: `sonde convert --to collapsed` let a
  # Sonde::ArgumentError escape from write (a backtrace).
  def test_no_sample_types
    forge = PprofForge::Builder.new
    forge.function(1, "f", "f.rb")
    forge.location(1, 1, 1)
    forge.sample([1], [], "thread id" => 1)
    assert_raises(Sonde::Convert::ProfileError) { Sonde::Convert.new(Sonde::Pprof.decode(forge.gzip), to: :collapsed) }
    assert_equal :rendered, PprofForge::Target.exercise(forge.gzip)
  end

  # "thread name" given as a number label: NoMethodError (Integer#empty?) in
  # Converters::Stacks, so convert and flamegraph crashed.
  def test_numeric_thread_name
    bytes = standard_with { |forge| forge.sample([1], [1, 1, 1, 1], "thread name" => 7, "thread id" => 9) }
    assert_equal :rendered, PprofForge::Target.exercise(bytes)
    stacks = Sonde::Converters::Stacks.new(Sonde::Pprof.decode(bytes))
    assert_includes stacks.threads.map(&:label), "7"
  end

  # A ten-byte varint with bits past the 64th was silently cut to 64 bits.
  def test_varint_past_64_bits
    bytes = standard_with { |forge| forge.scalar(9, (1 << 64) + 3) }
    error = assert_raises(Sonde::Pprof::DecodeError) { Sonde::Pprof.decode(bytes) }
    assert_match(/varint overflows 64 bits at byte \d+/, error.message)
    # 2**64 - 1 itself is a valid uint64.
    assert_equal(-1, Sonde::Pprof.decode(standard_with { |forge| forge.scalar(9, (1 << 64) - 1) }).time_nanos)
  end

  # The mutator gives the same input for the same (seed, index): a finding
  # can be made again from the two numbers it is saved under.
  def test_inputs_are_reproducible
    corpus = [PprofForge::Builder.standard.gzip, PprofForge::Builder.standard.tap { |f| f.sample([2], [1, 2, 3, 4]) }.gzip]
    first = PprofForge::Mutator.new(corpus)
    second = PprofForge::Mutator.new(corpus)
    50.times { |i| assert_equal first.input(42, i), second.input(42, i) }
  end
end
