# frozen_string_literal: true

# Benchmarks (bench/): overhead and sampling cost, side by side with
# StackProf. Not part of `rake test`: the full run takes about 15 minutes.
# The smoke run (about 10 s) checks that every workload and profiler still
# runs and fails when one breaks; CI runs it.
namespace :bench do
  desc "Benchmarks, tiny sizes (~10 s): fails if a workload or profiler breaks"
  task smoke: :compile do
    sh RbConfig.ruby, File.expand_path("../bench/run.rb", __dir__), "--smoke"
  end
end

desc "Benchmarks: overhead and sampling cost vs StackProf; writes bench/RESULTS.md (~15 min)"
task bench: :compile do
  sh RbConfig.ruby, File.expand_path("../bench/run.rb", __dir__)
end
