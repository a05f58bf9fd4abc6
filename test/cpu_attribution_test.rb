# frozen_string_literal: true

require "zlib"
require_relative "support/test_helper"

# CPU time where it is spent. Each workload measures its own truth (thread
# CPU clocks, a known call structure) and the profile must agree with it,
# and with StackProf, the peer that reads the stack in its signal handler,
# on the same program:
#
# - straight_line: a method of straight-line arithmetic, then a trivial
#   callee. Reading the stack at the next safe point would show the callee.
# - bursty_threads: threads that burn 3 ms then sleep 7 ms. Charging CPU
#   to the stack a thread has at the sample would show Kernel#sleep.
# - gvl_released_c: a thread in zlib's deflate, which runs without the GVL.
class CpuAttributionTest < Minitest::Test
  include SondeTestHelper

  def setup
    @dir = Dir.mktmpdir("sonde-attribution")
  end

  def teardown
    FileUtils.remove_entry(@dir)
  end

  # The CPU time of the samples whose leaf is `name` (its own time).
  def self_cpu(profile, name)
    total(profile, "cpu-time") { |s| function_names(profile, s).first == name }
  end

  # The CPU time of the samples with `name` anywhere on the stack.
  def total_cpu(profile, name, &filter)
    total(profile, "cpu-time") { |s| in_function?(profile, s, name) && (filter.nil? || filter.call(s)) }
  end

  # On Ruby 3.1/3.2 with YJIT the signal handler does not read stacks (YJIT
  # publishes a frame before it writes it there): they are read at the next
  # safe point, with the bias these two tests exist to catch. DESIGN.md,
  # "Reading a stack in the signal handler".
  def skip_where_stacks_are_read_at_safe_points
    return unless Sonde::Platform.backend == :mjit_header && ENV["RUBY_YJIT_ENABLE"] == "1"

    skip "Ruby #{RUBY_VERSION} with YJIT: stacks are read at the next safe point, not in the signal handler"
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 1.12-1.17x its bound (>=); "the thread's CPU time vs
  # its clock" -0.6% to -0.3% of ±10%; "StackProf agrees crunch does the work" 1.15-1.16x its bound
  # (>=); "Sonde's share vs StackProf's on the same program" -0.0356 to 0.0176 of ±0.1.
  statistical def test_straight_line_code_keeps_its_own_cpu_time
    skip_where_stacks_are_read_at_safe_points
    out = File.join(@dir, "straight.pprof")
    facts = run_workload("straight_line", out, "2.0")
    profile = Sonde::Pprof.read(out)
    assert_go_pprof_reads(out)

    crunch = self_cpu(profile, "Object#crunch")
    trivial = self_cpu(profile, "Object#trivial")
    share = crunch.to_f / (crunch + trivial)
    assert_operator share, :>=, 0.85, "crunch's own CPU time of crunch + trivial (safe-point bias: trivial gets it)"
    assert_within facts["cpu"], total(profile, "cpu-time") / 1e9, 0.10, "the thread's CPU time vs its clock"

    peer = stackprof_shares("straight_line")
    if peer
      peer_share = peer[:crunch_self].to_f / (peer[:crunch_self] + peer[:trivial_self])
      assert_operator peer_share, :>=, 0.85, "StackProf agrees crunch does the work"
      assert_in_delta peer_share, share, 0.10, "Sonde's share vs StackProf's on the same program"
    end
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 2.67-2.67x its bound (>=); a bound 0.29-0.42x its
  # bound (<).
  statistical def test_straight_line_samples_spread_over_the_lines_that_ran
    skip_where_stacks_are_read_at_safe_points
    out = File.join(@dir, "lines.pprof")
    facts = run_workload("straight_line", out, "2.0")
    profile = Sonde::Pprof.read(out)
    first, call, last = facts.values_at("crunch_first_line", "crunch_call_line", "crunch_end_line")
    by_line = Hash.new(0)
    index = profile.value_index("cpu-time")
    profile.samples.each do |sample|
      function, line = profile.frames(sample).first
      by_line[line] += sample.values[index] if function.name == "Object#crunch"
    end
    crunch = by_line.values.sum
    assert_operator crunch, :>, 0
    body_lines = by_line.keys.count { |line| line > first && line < call }
    assert_operator body_lines, :>=, 15, "crunch's samples should land on many of its 40 lines: #{by_line.sort.inspect}"
    stacked = (by_line[call] + by_line[last]).to_f / crunch
    assert_operator stacked, :<, 0.2, "samples stacked on crunch's call to trivial and its end: #{by_line.sort.inspect}"
    assert by_line.keys.all? { |line| line.between?(first, last) }, "lines outside crunch: #{by_line.keys.sort.inspect}"
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): a bound 1.09-1.10x its bound (>=); a bound 0.00-0.12x its
  # bound (<=); "bursty-0's CPU time vs its own clock" -0.0% to -0.0% of ±10%; "StackProf agrees
  # burst has the CPU" 1.11-1.11x its bound (>=); a difference -0.0163 to -0.00801 of ±0.08.
  statistical def test_bursty_threads_cpu_goes_to_the_burst_not_to_sleep
    out = File.join(@dir, "bursty.pprof")
    facts = run_workload("bursty_threads", out, "3.0")
    profile = Sonde::Pprof.read(out)
    assert_go_pprof_reads(out)
    names = facts.fetch("threads").keys
    bursty = ->(s) { names.include?(thread_name(s)) }

    all = total(profile, "cpu-time", &bursty)
    burst = total_cpu(profile, "Object#burst", &bursty)
    sleeping = total_cpu(profile, "Kernel#{kernel_separator}sleep", &bursty)
    # The truth beside each verdict: the share of the threads' CPU that
    # burst measured itself (the rest went to the waits' entries and exits).
    truth = bursty_truth(facts)
    shares = format("burst %.1f%%, Kernel#sleep %.1f%%, truth: burst %.1f%%", 100.0 * burst / all,
                    100.0 * sleeping / all, 100 * truth)
    # 90% and 5% are the bounds while the workload's own truth is 95% or
    # more (93.9-98.8% seen); on a machine busy enough that the waits'
    # entries and exits take more (87.3% seen in CI), Sonde is held to
    # within 5 points of the truth instead.
    assert_operator burst, :>=, [0.90, truth - 0.05].min * all, "burst's share of the bursty threads' CPU time (#{shares})"
    assert_operator sleeping, :<=, [0.05, 1 - truth + 0.05].max * all,
                    "Kernel#sleep's share of the bursty threads' CPU time (#{shares})"

    facts.fetch("threads").each do |name, thread|
      sampled = total(profile, "cpu-time") { |s| thread_name(s) == name } / 1e9
      assert_within thread["cpu"], sampled, 0.10, "#{name}'s CPU time vs its own clock"
    end

    peer = stackprof_shares("bursty_threads")
    if peer
      peer_share = peer[:burst_total].to_f / peer[:samples]
      assert_operator peer_share, :>=, [0.90, peer[:truth] - 0.05].min, "StackProf agrees burst has the CPU"
      # The peer runs the workload again, with a truth of its own (CI once
      # saw Sonde at 82.4% and StackProf at 93.5%, each near its run's
      # truth): each profiler is compared with the truth of its own run.
      assert_in_delta peer_share - peer[:truth], burst.to_f / all - truth, 0.08,
                      format("Sonde's error vs StackProf's, each against its own run's truth " \
                             "(Sonde %.1f%% of truth %.1f%%, StackProf %.1f%% of truth %.1f%%)",
                             100.0 * burst / all, 100 * truth, 100 * peer_share, 100 * peer[:truth])
    end
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "the compressor's CPU time vs its clock" -0.0% to -0.0% of
  # ±10%; "the main thread's CPU time vs its clock" -2.2% to -0.2% of ±10%; "deflate's share of the
  # compressor's CPU" 1.25-1.25x its bound (>=); "the compressor's CPU comes with its Ruby stack"
  # 1.05-1.05x its bound (>=); "CPU samples of the compressor outside the GVL" 3.92-4.06x its bound
  # (>=).
  statistical def test_c_code_without_the_gvl_gets_cpu_samples_with_its_ruby_stack
    out = File.join(@dir, "zlib.pprof")
    facts = run_workload("gvl_released_c", out, "2.0")
    profile = Sonde::Pprof.read(out)
    assert_go_pprof_reads(out)
    compressor = ->(s) { thread_name(s) == "compressor" }

    cpu = total(profile, "cpu-time", &compressor)
    assert_within facts["threads"]["compressor"]["cpu"], cpu / 1e9, 0.10, "the compressor's CPU time vs its clock"
    assert_within facts["threads"]["main"]["cpu"], total(profile, "cpu-time") { |s| thread_name(s) == "main" } / 1e9,
                  0.10, "the main thread's CPU time vs its clock"
    deflate = total_cpu(profile, "Zlib::Deflate.deflate", &compressor)
    under_compress = total_cpu(profile, "Object#compress", &compressor)
    assert_operator deflate, :>=, 0.8 * cpu, "deflate's share of the compressor's CPU"
    assert_operator under_compress, :>=, 0.95 * cpu, "the compressor's CPU comes with its Ruby stack"
    # Sampled by its own CPU timer while it did not hold the GVL: the
    # samples count, and they say so.
    blocked_samples = total(profile, "cpu-samples") { |s| compressor.call(s) && s.labels["state"] == "blocked" }
    assert_operator blocked_samples, :>=, 50, "CPU samples of the compressor outside the GVL"
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "effective CPU sampling rate vs the kernel tick" 0.73-0.80x
  # its bound (<=); a bound 1.83-2.01x its bound (>=).
  statistical def test_stats_show_the_cpu_timers_and_their_effective_rate
    out = File.join(@dir, "rate.pprof")
    facts = run_workload("gvl_released_c", out, "1.0", "1000")
    stats = facts.fetch("stats")
    assert_equal true, stats["cpu_timers"]
    assert_operator stats["cpu_timer_signals"], :>, 0
    # The kernel checks CPU timers at its tick: 1000 Hz asked, at most the
    # tick delivered per second of running. Per second of CPU it can be a
    # little more where the VM's host steals time (the thread's clock runs
    # slower than the ticks that check it: 277.9 Hz seen in CI at 250).
    # The main thread holds the GVL, so wall ticks land on it, and a tick
    # that finds its timer 2 intervals overdue takes its CPU sample: up to
    # half the rate asked comes that way on top (cpu_timers.h).
    tick = kernel_tick_hz
    assert_operator stats["cpu_sample_rate_hz"], :<=, tick * 1.25 + 1000 / 2,
                    "effective CPU sampling rate vs the kernel tick and the overdue ticks"
    assert_operator stats["cpu_sample_rate_hz"], :>=, [tick, 1000].min * 0.5
    assert_operator stats["cpu_samples_by_tick"], :>, 0, "ticks that took an overdue CPU sample"
    assert_equal 0, stats["cpu_timer_threads"], "no timer outlives the run"
  end

  # A thread that shares its core: the kernel's tick seldom finds it
  # running, so its CPU timer seldom fires (cpu_timers.h); without the wall
  # ticks standing in, each label here got 0 CPU (0 CPU signals, 3 runs of 3).
  # Statistical. Its bounds against what 5 runs measured (3.1, 6 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): each label's CPU time -3.2% to +0.9%
  # of ±15%.
  statistical def test_a_thread_sharing_its_core_keeps_each_labels_cpu
    skip "taskset is not installed (util-linux)" unless system("taskset -V", out: File::NULL, err: File::NULL)
    out = File.join(@dir, "shared_core.pprof")
    facts = with_busy_process_on_core(0) { run_workload_on_core(0, "labelled_phases", out, "0.2", "250") }
    profile = Sonde::Pprof.read(out)
    facts.fetch("phases").each do |endpoint, seconds|
      cpu = total(profile, "cpu-time") { |s| s.labels["endpoint"] == endpoint } / 1e9
      assert_within seconds, cpu, 0.15, "#{endpoint}'s CPU time vs its clock"
    end
  rescue Minitest::Assertion => e
    raise e.class, "#{e.message} (Sonde's stats: #{facts && facts["stats"]})"
  end

  private

  # A process burning CPU on one core for the block's duration.
  def with_busy_process_on_core(core)
    busy = Process.spawn("taskset", "-c", core.to_s, RbConfig.ruby, "-e", "loop {}")
    yield
  ensure
    Process.kill(:KILL, busy) if busy
    Process.wait(busy) if busy
  end

  # A workload pinned to one core at nice 5: a quarter of the core beside
  # a busy process at the caller's priority.
  def run_workload_on_core(core, name, *args)
    stdout, stderr, status = Open3.capture3("taskset", "-c", core.to_s, "nice", "-n", "5", RbConfig.ruby, "-I#{LIB}",
                                            File.join(WORKLOADS, "#{name}.rb"), *args)
    assert status.success?, "workload #{name} failed (#{status.inspect}):\n#{stderr}"
    JSON.parse(stdout.lines.last)
  end

  def kernel_separator
    Sonde::Platform.backend == :public_api ? "." : "#"
  end

  # The kernel's tick (CONFIG_HZ), from its build configuration where it
  # shows it (/proc/config.gz, else /boot/config-*); 250 when neither is
  # there, the tick of these machines.
  def kernel_tick_hz
    config = if File.exist?("/proc/config.gz")
               Zlib::GzipReader.open("/proc/config.gz", &:read)
             else
               path = "/boot/config-#{`uname -r`.strip}"
               File.exist?(path) ? File.read(path) : ""
             end
    Integer(config[/^CONFIG_HZ=(\d+)/, 1] || 250)
  end

  # Runs the workload under StackProf (cpu mode, raw, 100 Hz) and reads its
  # dump: the peer's answer on the same program. nil when StackProf is not
  # installed, and under YJIT: there StackProf reads the stack at the next
  # safe point (Ruby 3.1 with YJIT, straight_line: 97% on `trivial`, 0.5% on
  # `crunch`), so it is no reference; the truths above still hold for Sonde.
  # The share of the bursty threads' CPU that burst measured itself (the
  # rest went to the waits' entries and exits).
  def bursty_truth(facts)
    threads = facts.fetch("threads").values
    threads.sum { |t| t["burst_cpu"] } / threads.sum { |t| t["cpu"] }
  end

  def stackprof_shares(workload)
    return nil if ENV["RUBY_YJIT_ENABLE"] == "1"
    return nil unless system(RbConfig.ruby, "-e", "require 'stackprof'", err: File::NULL)

    dump = File.join(@dir, "#{workload}.stackprof")
    facts = run_workload(workload, dump, workload == "bursty_threads" ? "3.0" : "2.0", "100", "stackprof",
                         gems: true)
    frames = Marshal.load(File.binread(dump)).fetch(:frames).values # rubocop:disable Security/MarshalLoad -- our own dump
    by_name = ->(name) { frames.find { |f| f[:name] == name } || { samples: 0, total_samples: 0 } }
    data = Marshal.load(File.binread(dump)) # rubocop:disable Security/MarshalLoad -- our own dump
    {
      samples: data.fetch(:samples),
      crunch_self: by_name.call("Object#crunch")[:samples],
      trivial_self: by_name.call("Object#trivial")[:samples],
      burst_total: by_name.call("Object#burst")[:total_samples],
      truth: facts["threads"] && bursty_truth(facts),
    }
  end
end
