# frozen_string_literal: true

require_relative "stress_helper"
require "fileutils"

# Long run (tracker issue 7, case 8). Proves that Sonde can stay on: a
# threads workload (test/stress/workloads/soak_threads.rb: 8 threads mixing
# CPU work, pipe IO and sleeps) runs in continuous mode with the directory
# exporter for 10 minutes under SONDE_STRESS=full (every: 10 s) and 1 minute
# otherwise (every: 5 s), and
#   - a profile file appears for every flush: one every `every` seconds
#     before the stop, plus the last period's at stop (duration/every in
#     all, rounded up; one more or less for timing);
#   - none is ever partial: a reader polling the directory throughout
#     decodes each file as soon as it appears and never fails, and every
#     file decodes fully again at the end;
#   - the files tile the run: each starts where the previous one ended (to
#     the nanosecond), and each has samples of all 8 threads and none of
#     Sonde's own threads;
#   - memory is flat: the process's RSS, sampled every few seconds, grows by
#     less than 5 MB over the second half of the run;
#   - the application's work rate is steady: the second half does at least
#     60% of the first half's work per second (2 shared cores: noisy), and
#     no second goes by without progress.
# The workload runs on a copy of lib/ taken at the start, so that a rebuild
# or an edit in the tree during the long run cannot change (or, before the
# Rakefile installed .so files by rename, kill with SIGBUS) what runs.
class SoakTest < Minitest::Test
  include SondeStress::Assertions

  SECONDS = SondeStress.size(60, 600)
  EVERY = SondeStress.size(5, 10)
  RSS_EVERY = SondeStress.size(2, 5)
  POLL_SECONDS = 0.25
  MAX_SECOND_HALF_GROWTH_KB = 5 * 1024
  MIN_RATE_RATIO = 0.6
  WORKER_THREADS = (0...4).flat_map { |pair| ["producer-#{pair}", "consumer-#{pair}"] }.freeze
  # Between one file's end and the next one's start: none (each period
  # starts where the previous one ended, to the nanosecond).
  MAX_TILING_GAP_NS = 0

  def setup
    @dir = Dir.mktmpdir("sonde-soak")
    @export = File.join(@dir, "profiles")
  end

  def teardown
    @poller&.stop
    keep_files(@poller) if @poller && !passed?
    FileUtils.rm_rf(@dir)
  end

  # Decodes each new file of the directory as soon as it shows; keeps the
  # bytes of each (the exporter keeps only the newest 10).
  class Poller
    attr_reader :seen, :failures, :polls

    def initialize(directory)
      @directory = directory
      @seen = {}
      @failures = []
      @polls = 0
      @stop = false
    end

    def start
      @thread = Thread.new do
        until @stop
          poll
          sleep POLL_SECONDS
        end
        poll
      end
      self
    end

    def stop
      @stop = true
      @thread.join
    end

    def poll
      @polls += 1
      Dir.glob(File.join(@directory, "*.pprof")).each do |path|
        next if @seen.key?(path)

        begin
          bytes = File.binread(path)
        rescue Errno::ENOENT
          next # removed by the exporter's rotation between the glob and the read
        end
        begin
          @seen[path] = [bytes, Sonde::Pprof.decode(bytes)]
        rescue Sonde::Pprof::DecodeError => e
          @failures << "#{File.basename(path)} (#{bytes.bytesize} bytes): #{e.message}"
          @seen[path] = [bytes, nil]
        end
      end
    end
  end

  def test_continuous_mode_with_the_directory_exporter_stays_steady
    lib = File.join(@dir, "lib")
    FileUtils.cp_r(SondeStress::LIB, lib)
    argv = [RbConfig.ruby, "-I#{lib}", File.join(SondeStress::WORKLOADS, "soak_threads.rb"), SECONDS.to_s, @export,
            EVERY.to_s]
    poller = @poller = Poller.new(@export).start
    rss = []
    stdout = stderr = status = nil
    Open3.popen3(*argv, pgroup: true) do |stdin, out, err, wait|
      stdin.close
      out_reader = Thread.new { out.read }
      err_reader = Thread.new { err.read }
      started = SondeStress.now
      until wait.join(RSS_EVERY)
        kb = SondeStress.rss_kb(wait.pid)
        rss << [SondeStress.now - started, kb] if kb
        next if SondeStress.now - started < SECONDS + 120

        Process.kill(:KILL, -wait.pid)
        wait.join
        flunk "the soak workload did not finish in #{SECONDS + 120} s"
      end
      stdout = out_reader.value
      stderr = err_reader.value
      status = wait.value
    end
    poller.stop
    assert_clean_exit(status, stderr, "soak workload")
    assert_empty stderr, "the workload printed warnings"
    facts = JSON.parse(stdout.lines.last)

    check_files(poller, facts)
    growth = check_memory(rss)
    first_rate, second_rate, slowest = check_work_rate(facts)
    profiles = poller.seen.values.map(&:last)
    SondeStress.record("soak", seconds: facts["seconds"].round(1), every: EVERY, files: poller.seen.size,
                               polls: poller.polls, decode_failures: poller.failures.size,
                               samples: profiles.sum { |p| p.samples.size },
                               rss_first_kb: rss.first&.last, rss_half_kb: rss_at(rss, 0.5), rss_last_kb: rss.last&.last,
                               rss_max_kb: rss.map(&:last).max, second_half_growth_kb: growth,
                               rounds_per_s_first_half: first_rate.round, rounds_per_s_second_half: second_rate.round,
                               slowest_second: slowest, stop_seconds: facts["stop_seconds"].round(2))
  end

  # The files of a failed run, for a look.
  def keep_files(poller)
    keep = File.join(SondeStress::ROOT, "tmp", "stress", "soak-failed-#{Process.pid}")
    FileUtils.mkdir_p(keep)
    poller.seen.each { |path, (bytes, _)| File.binwrite(File.join(keep, File.basename(path)), bytes) }
  end

  def check_files(poller, facts)
    assert_empty poller.failures, "the reader saw files that did not decode (partial?)"
    files = poller.seen.keys.sort
    # Flushes at every, 2 * every, ... before the stop, then the last period's.
    expected = (facts["seconds"] / EVERY).ceil
    assert_includes (expected - 1)..(expected + 1), files.size,
                    "expected about #{expected} files (#{facts["seconds"].round(1)} s / every #{EVERY} s, rounded up), " \
                    "got #{files.size}: #{files.map { |f| File.basename(f) }}"
    # Each file again, in full, from the bytes the reader kept.
    profiles = poller.seen.values.map { |bytes, _| Sonde::Pprof.decode(bytes) }.sort_by(&:time_nanos)
    profiles.each_cons(2) do |previous, following|
      gap = following.time_nanos - (previous.time_nanos + previous.duration_nanos)
      assert_operator gap.abs, :<=, MAX_TILING_GAP_NS, "profiles must tile the run: a gap of #{gap} ns"
    end
    total = profiles.sum(&:duration_nanos) / 1e9
    assert_in_delta facts["seconds"], total, 2.0 + (EVERY * 0.2), "the files cover the run"
    profiles.each_with_index do |profile, i|
      names = profile.samples.map { |sample| sample.labels["thread name"] }.uniq
      # The last period can be short: only the full ones must show every thread.
      missing = WORKER_THREADS - names
      if i < profiles.size - 1
        counts = profile.samples.group_by { |sample| sample.labels["thread name"] }
                        .transform_values { |samples| samples.sum { |sample| sample.values[3] } }
        assert_empty missing, "profile #{i + 1} of #{profiles.size} (#{profile.duration_nanos / 1e9} s, kept in " \
                              "tmp/stress/soak-failed-PID/) lacks threads #{missing}; wall-samples by thread: #{counts}"
      end
      own = names.grep(/\Asonde-/)
      assert_empty own, "Sonde's own threads must stay out of profiles: #{own}"
    end
  end

  # Median RSS of the samples around a fraction of the run.
  def rss_at(rss, fraction)
    return nil if rss.empty?

    middle = (rss.size * fraction).floor.clamp(0, rss.size - 1)
    window = rss[[middle - 1, 0].max..[middle + 1, rss.size - 1].min].map(&:last).sort
    window[window.size / 2]
  end

  def check_memory(rss)
    assert_operator rss.size, :>=, 8, "too few RSS samples: #{rss.size}"
    half = rss_at(rss, 0.5)
    last = rss.last(3).map(&:last).sort[1]
    growth = last - half
    assert_operator growth, :<, MAX_SECOND_HALF_GROWTH_KB,
                    "RSS grew by #{growth} KB over the second half (#{half} -> #{last} KB); samples: #{rss.map(&:last)}"
    growth
  end

  def check_work_rate(facts)
    per_second = facts["rounds_per_second"]
    assert_operator per_second.size, :>=, SECONDS - 2
    warm = [per_second.size / 10, 2].max
    steady = per_second[warm..]
    first = steady[0, steady.size / 2]
    second = steady[steady.size / 2..]
    first_rate = first.sum.to_f / first.size
    second_rate = second.sum.to_f / second.size
    assert_operator second_rate, :>=, first_rate * MIN_RATE_RATIO,
                    "the work rate fell from #{first_rate.round}/s to #{second_rate.round}/s: #{per_second}"
    slowest = steady.min
    assert_operator slowest, :>, 0, "a second without any progress: #{per_second}"
    [first_rate, second_rate, slowest]
  end
end
