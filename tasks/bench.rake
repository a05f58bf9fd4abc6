# frozen_string_literal: true

# Benchmarks (bench/): overhead, sampling cost and accuracy, side by side
# with the peer profilers (StackProf; Datadog, Vernier and pf2 once
# `rake bench:peers` installed them), on this machine's Ruby and on Ruby 3.3
# (script/ruby33). Not part of `rake test`. The smoke run (about a minute)
# checks that every workload and profiler still runs and fails when one
# breaks; it runs this machine's Ruby only, installs nothing and needs no
# network (peers not installed are skipped, and it says so); CI runs it.
# Sizes, Rubies and the report's path come from SONDE_BENCH_* variables
# (bench/support/settings.rb):
#   SONDE_BENCH_RESULTS=/tmp/trial.md SONDE_BENCH_PAIRS=3 rake bench
BENCH_RUN = File.expand_path("../bench/run.rb", __dir__)
INSTALL_PEERS = File.expand_path("../bench/support/install_peers.rb", __dir__)
ALLOC_COST = File.expand_path("../bench/alloc_cost.rb", __dir__)
ALLOC_IN_PROCESS = File.expand_path("../bench/alloc_in_process.rb", __dir__)
SCRIPT_RUBY = File.expand_path("../script/ruby", __dir__)
RUBY33 = File.expand_path("../script/ruby33", __dir__)

# Sonde's 3.3 and 3.4 builds, for the Rubies the run includes.
def compile_for_benchmarked_rubies(list = ENV.fetch("SONDE_BENCH_RUBIES", "host,3.3"))
  rubies = list.split(",")
  sh RUBY33, "rake", "compile" if rubies.include?("3.3")
  sh SCRIPT_RUBY, "3.4", "rake", "compile" if rubies.include?("3.4")
end

namespace :bench do
  desc "Benchmarks, tiny sizes, this Ruby only (~1 min, no network): fails if a workload or profiler breaks"
  task smoke: :compile do
    sh RbConfig.ruby, BENCH_RUN, "--smoke"
    sh RbConfig.ruby, ALLOC_COST, "--smoke"
    sh RbConfig.ruby, "-Ilib", ALLOC_IN_PROCESS, "1"
  end

  desc "Sonde vs StackProf cpu mode, process CPU of the cpu workload, many interleaved rounds (ROUNDS=30 RATE=100 " \
       "SLICES=100 SLICE_REQUESTS=2500; ~6 min)"
  task cpu_vs_stackprof: :compile do
    sh RUBY33, "rake", "compile" if ENV.fetch("SONDE_BENCH_RUBIES", "").include?("3.3")
    sh RbConfig.ruby, File.join(__dir__, "..", "bench", "cpu_vs_stackprof.rb"), ENV.fetch("ROUNDS", "30"),
       ENV.fetch("RATE", "100"), ENV.fetch("SLICES", "100"), ENV.fetch("SLICE_REQUESTS", "2500")
  end

  desc "Sonde vs StackProf cpu mode, Datadog, and on 3.3 Vernier and pf2, counted under perf: each one's share of " \
       "the cpu workload's CPU samples at 100 and 1000 Hz, 3.1 and 3.3 (REPEATS=3, ~25 min, needs perf); " \
       "writes bench/CPU_COST_PERF.md or $SONDE_BENCH_CPU_COST_PERF"
  task cpu_perf: [:compile, :peers] do
    compile_for_benchmarked_rubies
    # Read before the run: its children load the lib/ of now, and the tree may move on meanwhile.
    sonde = "#{`git rev-parse --short HEAD`.strip}#{`git status --porcelain ext lib`.empty? ? "" : " (ext/ or lib/ modified)"}"
    env = { "SONDE_BENCH_RUBIES" => ENV.fetch("SONDE_BENCH_RUBIES", "host,3.3") }
    output = IO.popen(env, [RbConfig.ruby, File.join(__dir__, "..", "bench", "cpu_cost_perf.rb"),
                            ENV.fetch("REPEATS", "3")], &:read)
    raise "bench/cpu_cost_perf.rb failed" unless $?.success?

    path = ENV.fetch("SONDE_BENCH_CPU_COST_PERF", File.expand_path("../bench/CPU_COST_PERF.md", __dir__))
    File.write(path, <<~MARKDOWN + output)
      # What CPU sampling costs, counted under perf

      Written by `rake bench:cpu_perf` (bench/cpu_cost_perf.rb) on #{Time.now.utc.strftime("%Y-%m-%d %H:%M")} UTC,
      Sonde at commit #{sonde}.
      Each profiler is started as bench/RESULTS.md's "Profilers compared" says. A perf sample of the Ruby
      process is a profiler's cost when one of its native libraries is on the stack, it ran on one of the
      profiler's threads, or it ran in the kernel's signal delivery or CPU-timer code; the rest of the
      process's samples are the workload's. What a profiler does to the workload's own speed (caches,
      slow paths) is not in these counts: the timed benchmarks (bench/RESULTS.md) have that, within their noise.

    MARKDOWN
    puts "wrote #{path}"
  end

  desc "What labels (Sonde::Middleware) cost a Rack request, in-process A/B/A while Sonde samples (SCALE=1: 100 rounds, ~30 s)"
  task labels: :compile do
    sh RbConfig.ruby, File.join(__dir__, "..", "bench", "labels_cost.rb"), ENV.fetch("SCALE", "1")
  end

  # Its own report, not a section of RESULTS.md: `rake bench` already takes
  # 20 to 45 minutes here, and this is a question of its own (what turning
  # alloc: or heap: on costs), asked each time the allocation path changes.
  desc "What allocation profiling costs (Sonde alloc/heap vs StackProf object mode, Vernier), " \
       "3.1 and 3.3 (ROUNDS=7, ~12 min); writes bench/ALLOC_RESULTS.md or $SONDE_BENCH_ALLOC_RESULTS"
  task alloc: [:compile, :peers] do
    compile_for_benchmarked_rubies
    sh RbConfig.ruby, ALLOC_COST, ENV.fetch("ROUNDS", "7")
  end

  # The in-process view of the same question: slices of one process, so
  # the machine's noise between processes stays out (bench/alloc_in_process.rb).
  desc "What allocation profiling costs, in one process per Ruby (3.1, and 3.3/3.4 where script/ruby has them; " \
       "ROUNDS=15, ~2 min a Ruby); writes bench/ALLOC_IN_PROCESS.md or $SONDE_BENCH_ALLOC_IN_PROCESS"
  task alloc_in_process: :compile do
    rounds = ENV.fetch("ROUNDS", "15")
    rubies = ENV.fetch("SONDE_BENCH_RUBIES", "host,3.3,3.4").split(",")
    sections = rubies.map do |ruby|
      command = ruby == "host" ? [RbConfig.ruby] : [SCRIPT_RUBY, ruby, "ruby"]
      sh(*command[0..-2], "rake", "compile") unless ruby == "host"
      output = IO.popen([*command, "-Ilib", ALLOC_IN_PROCESS, rounds], &:read)
      raise "bench/alloc_in_process.rb failed on #{ruby}" unless $?.success?

      output
    end
    path = ENV.fetch("SONDE_BENCH_ALLOC_IN_PROCESS", File.expand_path("../bench/ALLOC_IN_PROCESS.md", __dir__))
    File.write(path, <<~MARKDOWN + sections.join("\n"))
      # Allocation profiling: what it costs, in one process

      Written by `rake bench:alloc_in_process` (bench/alloc_in_process.rb) on #{Time.now.utc.strftime("%Y-%m-%d %H:%M")} UTC,
      Sonde at commit #{`git rev-parse --short HEAD`.strip}#{`git status --porcelain ext lib`.empty? ? "" : " (ext/ or lib/ modified)"}.
      Each round runs every variant once per workload, in a shuffled order, in slices of about half a second of
      the same work; times are the main thread's CPU time (the listening, the hook and the samples all run there;
      Sonde's own threads take the time sampling's share, the same in every Sonde row). "fastest" is the fastest
      slice, "median" the median one, each over the unprofiled slices' ("none"); "paired" each slice over the
      unprofiled slice of its round, median and quartiles over the rounds; "none (A/A)" is unprofiled too:
      its distance from none is the noise. Sonde samples time at 100 Hz in every Sonde row.
      Below each table, the cost at the default duty estimated from its parts, each measured above the noise:
      what an allocation heard costs (from the duty-1 slices over the time-only ones, per allocation heard),
      times the allocations the default duty heard (`allocations_heard`), plus the time Sonde spent turning
      the hook on and off and closing windows (`alloc_window_switch_seconds`), over none's median slice.

    MARKDOWN
    puts "wrote #{path}"
  end

  desc "What loading Sonde costs `ruby -e 1` (-rsonde, -rsonde/record), many interleaved rounds, and what it " \
       "leaves on the heap (ROUNDS=40, ~1 min; CHECK=1 fails when -rsonde/record adds more than 0.03 s of CPU)"
  task startup: :compile do
    sh RbConfig.ruby, File.join(__dir__, "..", "bench", "startup_cost.rb"), ENV.fetch("ROUNDS", "40"),
       *("--check" if ENV["CHECK"] == "1")
  end

  desc "What a forked child costs under continuous mode (a fork-per-job worker): children that do nothing, forked " \
       "one after another, with and without Sonde, interleaved rounds (ROUNDS=9 CHILDREN=40, ~1 min); printed"
  task fork: :compile do
    sh RbConfig.ruby, File.join(__dir__, "..", "bench", "fork_cost.rb"), ENV.fetch("ROUNDS", "9"),
       ENV.fetch("CHILDREN", "40")
  end

  desc "What an idle process costs (0, 8, 32, 128 sleeping threads; none twice, Sonde, StackProf wall, Datadog, and " \
       "on 3.3 Vernier and pf2, at 100 Hz), 3.1 and 3.3, interleaved rounds (ROUNDS=5 SECONDS=4, ~25 min); " \
       "writes bench/IDLE_RESULTS.md or $SONDE_BENCH_IDLE_RESULTS"
  task idle: [:compile, :peers] do
    compile_for_benchmarked_rubies
    env = { "SONDE_BENCH_RUBIES" => ENV.fetch("SONDE_BENCH_RUBIES", "host,3.3") }
    sh env, RbConfig.ruby, File.join(__dir__, "..", "bench", "idle_cost.rb"), ENV.fetch("ROUNDS", "5"),
       ENV.fetch("SECONDS", "4")
  end

  desc "What starting and ending a thread costs (threads started and joined; none twice, Sonde, StackProf cpu, " \
       "Datadog, and on 3.3+ Vernier and pf2, at 100 Hz), 3.1, 3.3 and 3.4: timed in separate processes in " \
       "interleaved rounds (ROUNDS=9 THREADS=5000), then in one process in paired slices (SLICES=100 " \
       "SLICE_THREADS=1000), ~15 min; writes bench/THREAD_START_RESULTS.md or $SONDE_BENCH_THREAD_START_RESULTS"
  task thread_starts: [:compile, :peers] do
    env = { "SONDE_BENCH_RUBIES" => ENV.fetch("SONDE_BENCH_RUBIES", "host,3.3,3.4") }
    compile_for_benchmarked_rubies(env["SONDE_BENCH_RUBIES"])
    path = ENV.fetch("SONDE_BENCH_THREAD_START_RESULTS", File.expand_path("../bench/THREAD_START_RESULTS.md", __dir__))
    sh env.merge("SONDE_BENCH_THREAD_START_RESULTS" => path), RbConfig.ruby,
       File.join(__dir__, "..", "bench", "thread_start_cost.rb"), ENV.fetch("ROUNDS", "9"), ENV.fetch("THREADS", "5000"),
       ENV.fetch("SLICES", "100"), ENV.fetch("SLICE_THREADS", "1000")
  end

  desc "Memory over many flushes: continuous mode flushing every EVERY s (1) for SECONDS (600) beside the same " \
       "process without Sonde, RSS and Ruby's heap pages every 30 s, 3.1 and 3.4 one after the other; writes " \
       "bench/FLUSH_MEMORY_RESULTS.md"
  task flush_memory: :compile do
    env = { "SONDE_BENCH_RUBIES" => ENV.fetch("SONDE_BENCH_RUBIES", "host,3.4") }
    compile_for_benchmarked_rubies(env["SONDE_BENCH_RUBIES"])
    path = File.expand_path("../bench/FLUSH_MEMORY_RESULTS.md", __dir__)
    table = IO.popen(env, [RbConfig.ruby, File.join(__dir__, "..", "bench", "flush_memory.rb"),
                           ENV.fetch("SECONDS", "600"), ENV.fetch("EVERY", "1")], &:read)
    raise "bench/flush_memory.rb failed" unless $?.success?

    File.write(path, table)
    puts table, "wrote #{path}"
  end

  desc "What the timeline costs (entries per second, process CPU, profile size, stop time; on and off), " \
       "interleaved rounds (ROUNDS=5 SECONDS=10 WAKERS=8, ~2 min); writes bench/TIMELINE_RESULTS.md"
  task timeline: :compile do
    sh RbConfig.ruby, File.join(__dir__, "..", "bench", "timeline_cost.rb"), ENV.fetch("ROUNDS", "5"),
       ENV.fetch("SECONDS", "10"), ENV.fetch("WAKERS", "8")
  end

  desc "Install the peer profilers (datadog, vernier, pf2), pinned, into tmp/peers/ruby-<version> for this Ruby and 3.3"
  task :peers do
    sh RbConfig.ruby, INSTALL_PEERS
  end

  desc "The cost of a sampling pass alone (six shapes on this machine's Ruby, the Rails-worker shape and its " \
       "stack reads on each Ruby of SONDE_BENCH_RUBIES, default host,3.3,3.4; ~3 min): writes " \
       "tmp/bench/RESULTS.cost.md or $SONDE_BENCH_RESULTS"
  task cost: :compile do
    require_relative "../bench/support/settings"
    compile_for_benchmarked_rubies(ENV.fetch("SONDE_BENCH_RUBIES", SondeBench::COST_RUBIES))
    sh RbConfig.ruby, BENCH_RUN, "--cost"
  end

  desc "Accuracy alone (every profiler, both Rubies): writes tmp/bench/RESULTS.accuracy.md or $SONDE_BENCH_RESULTS"
  task accuracy: [:compile, :peers] do
    compile_for_benchmarked_rubies
    sh RbConfig.ruby, BENCH_RUN, "--accuracy"
  end
end

desc "Benchmarks: overhead, sampling cost and accuracy vs the peers on 3.1 and 3.3; writes bench/RESULTS.md or $SONDE_BENCH_RESULTS"
task bench: [:compile, "bench:peers"] do
  compile_for_benchmarked_rubies
  sh RbConfig.ruby, BENCH_RUN
end
