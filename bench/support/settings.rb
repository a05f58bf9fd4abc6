# frozen_string_literal: true

# How big the benchmark is. The full run (`rake bench`: a round of the
# overhead runs on both Rubies took about 72 s here, so the default 30 rounds
# about 45 minutes in all; SONDE_BENCH_PAIRS=10 SONDE_BENCH_LONG_SECONDS=20
# took 19) and the smoke run (`rake bench:smoke`, under a minute, numbers
# meaningless, only checks that everything still runs) differ only in
# these; each can be overridden with an environment variable, and
# SONDE_BENCH_RESULTS says where to write the report (a trial run on a noisy
# machine should not overwrite bench/RESULTS.md).
#
# The full run favours many short overhead runs (30 pairs at work scale 0.3,
# the cpu workload about 0.6 s) over a few long ones: the best-of estimate
# (measurements.rb) gets better with the number of runs, and a short run has
# a better chance to fall in a quiet moment of a shared machine.
require_relative "peers"

module SondeBench
  Settings = Struct.new(:smoke, :pairs, :scale, :cost_seconds, :cost_repeats, :long_seconds, :self_profile,
                        :self_profile_scale, :baselines_per_round, :seed, :results, :command, :rubies,
                        :accuracy_repeats, :accuracy_seconds, :accuracy_only, :cost_only, keyword_init: true) do
    def describe
      "Rubies #{rubies} (SONDE_BENCH_RUBIES), " \
        "#{pairs} pairs per overhead cell (SONDE_BENCH_PAIRS), work scale #{scale} (SONDE_BENCH_WORK_SCALE), " \
        "sample cost #{cost_repeats} x #{cost_seconds} s per shape (SONDE_BENCH_COST_REPEATS, " \
        "SONDE_BENCH_COST_SECONDS), long runs #{long_seconds} s (SONDE_BENCH_LONG_SECONDS), " \
        "accuracy #{accuracy_repeats} repeat(s) (SONDE_BENCH_ACCURACY_REPEATS) of " \
        "#{accuracy_seconds ? "#{accuracy_seconds} s" : "the scripts' own lengths"} (SONDE_BENCH_ACCURACY_SECONDS), " \
        "shuffle seed #{seed} (SONDE_BENCH_SEED), report written to #{shown_results} (SONDE_BENCH_RESULTS)"
    end

    def shown_results
      root = File.expand_path("../..", __dir__)
      results.start_with?("#{root}/") ? results.delete_prefix("#{root}/") : results
    end
  end

  # Unprofiled runs per round of six profiled ones: 2 pairs each profiled run
  # with a baseline at most three runs away; the smoke run saves time with 1.
  #
  # Rubies: the full run measures this machine's Ruby and 3.3 (through
  # script/ruby33); the smoke run only this one (CI runs it before the 3.3
  # chroot exists, and must not need the network). Accuracy runs each
  # script for its own default length (2 and 3 s) in the full run; the smoke
  # run's 1.2 s is just over the 1 s below which Datadog writes no profile.
  FULL = { baselines_per_round: 2, pairs: 30, scale: 0.3, cost_seconds: 2.0, cost_repeats: 3, long_seconds: 60, self_profile: true,
           self_profile_scale: 1.0, results: File.expand_path("../RESULTS.md", __dir__), rubies: "host,3.3",
           accuracy_repeats: 3, accuracy_seconds: nil }.freeze
  SMOKE = { baselines_per_round: 1, pairs: 1, scale: 0.03, cost_seconds: 0.1, cost_repeats: 1, long_seconds: 0.5, self_profile: true,
            self_profile_scale: 0.05, results: File.expand_path("../../tmp/bench/RESULTS.smoke.md", __dir__), rubies: "host",
            accuracy_repeats: 1, accuracy_seconds: 1.2 }.freeze
  # `rake bench:cost` times the Rails-worker pass on every Ruby the README
  # quotes it for; the whole run compares peers, which 3.4 lacks here.
  COST_RUBIES = "host,3.3,3.4"
  ACCURACY_RESULTS = File.expand_path("../../tmp/bench/RESULTS.accuracy.md", __dir__)
  COST_RESULTS = File.expand_path("../../tmp/bench/RESULTS.cost.md", __dir__)
  DEFAULT_SEED = 1

  # accuracy_only: `rake bench:accuracy`, the accuracy section alone, with
  # the full run's settings, written to tmp/bench/RESULTS.accuracy.md.
  # cost_only: `rake bench:cost`, the cost of a sampling pass alone (section
  # 2 and its targets: minutes, where the whole run takes most of an hour),
  # written to tmp/bench/RESULTS.cost.md.
  def self.settings(smoke:, accuracy_only: false, cost_only: false)
    base = smoke ? SMOKE : FULL
    env = ENV
    accuracy_seconds = env.fetch("SONDE_BENCH_ACCURACY_SECONDS", base[:accuracy_seconds])
    results = if accuracy_only then ACCURACY_RESULTS else cost_only ? COST_RESULTS : base[:results] end
    Settings.new(
      smoke: smoke,
      pairs: Integer(env.fetch("SONDE_BENCH_PAIRS", base[:pairs])),
      scale: Float(env.fetch("SONDE_BENCH_WORK_SCALE", base[:scale])),
      cost_seconds: Float(env.fetch("SONDE_BENCH_COST_SECONDS", base[:cost_seconds])),
      cost_repeats: Integer(env.fetch("SONDE_BENCH_COST_REPEATS", base[:cost_repeats])),
      long_seconds: Float(env.fetch("SONDE_BENCH_LONG_SECONDS", base[:long_seconds])),
      self_profile: env.fetch("SONDE_BENCH_SELF_PROFILE", base[:self_profile] ? "1" : "0") == "1",
      self_profile_scale: base[:self_profile_scale],
      baselines_per_round: base[:baselines_per_round],
      seed: Integer(env.fetch("SONDE_BENCH_SEED", DEFAULT_SEED)),
      results: env.fetch("SONDE_BENCH_RESULTS", results),
      command: command_of(smoke, accuracy_only, cost_only),
      rubies: env.fetch("SONDE_BENCH_RUBIES", cost_only ? COST_RUBIES : base[:rubies]).sub("host", Peers.ruby_series),
      accuracy_repeats: Integer(env.fetch("SONDE_BENCH_ACCURACY_REPEATS", base[:accuracy_repeats])),
      accuracy_seconds: accuracy_seconds && Float(accuracy_seconds),
      accuracy_only: accuracy_only,
      cost_only: cost_only
    )
  end

  def self.command_of(smoke, accuracy_only, cost_only)
    return "rake bench:accuracy" if accuracy_only
    return "rake bench:cost" if cost_only

    smoke ? "rake bench:smoke" : "rake bench"
  end
end
