# frozen_string_literal: true

# Benchmarks (bench/): overhead and sampling cost, side by side with
# StackProf. Not part of `rake test`: the full run takes about 16 minutes on
# a quiet machine. The smoke run (about 10-15 s) checks that every workload
# and profiler still runs and fails when one breaks; CI runs it. Sizes and
# the report's path come from SONDE_BENCH_* variables (bench/support/settings.rb):
#   SONDE_BENCH_RESULTS=/tmp/trial.md SONDE_BENCH_PAIRS=3 rake bench
namespace :bench do
  desc "Benchmarks, tiny sizes (~10-15 s): fails if a workload or profiler breaks"
  task smoke: :compile do
    sh RbConfig.ruby, File.expand_path("../bench/run.rb", __dir__), "--smoke"
  end
end

desc "Benchmarks: overhead and sampling cost vs StackProf; writes bench/RESULTS.md or $SONDE_BENCH_RESULTS (~16 min)"
task bench: :compile do
  sh RbConfig.ruby, File.expand_path("../bench/run.rb", __dir__)
end
