# frozen_string_literal: true

# The stress, fault and bad-input suite (test/stress/, tracker issue 7): not
# part of `rake test`. Every test/stress/*_test.rb picks its sizes with
# SondeStress.size(short, full) (test/stress/stress_helper.rb).
#
#   rake stress:ci   short sizes, about 5 minutes (what CI runs; the Ractor matrix runs on 3.3 and 3.4 too)
#   rake stress      SONDE_STRESS=full, about 15 minutes (a 10-minute soak, a 60-s fuzz)
#
# Each file runs in its own Ruby process, so that one file's child processes,
# handlers or leaks cannot color another's figures. Every file runs even when
# an earlier one fails; the task fails at the end, naming the failures.
# STRESS_FILES="churn thread_churn" runs only those files.

def stress_files
  all = Dir[File.expand_path("../test/stress/*_test.rb", __dir__)].sort
  only = ENV.fetch("STRESS_FILES", "").split(/[\s,]+/)
  return all if only.empty?

  all.select { |path| only.include?(File.basename(path, "_test.rb")) }
end

# Another session may rebuild the core while a file runs: its later child
# processes then load another build than its earlier ones. The summary says
# so next to that file.
def native_stamp
  Dir[File.expand_path("../lib/sonde/native/*.so", __dir__)].sort.map { |f| [f, File.mtime(f)] }
end

def run_stress(mode)
  env = { "SONDE_STRESS" => mode }
  root = File.expand_path("..", __dir__)
  failed = []
  timings = []
  stress_files.each do |file|
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    stamp = native_stamp
    puts "== #{File.basename(file)} (SONDE_STRESS=#{mode})"
    ok = system(env, RbConfig.ruby, "-w", "-I#{root}/lib", "-I#{root}/test", file, chdir: root)
    rebuilt = native_stamp != stamp ? " (the native core was rebuilt meanwhile)" : ""
    timings << format("%-28s %6.1f s %s%s", File.basename(file),
                      Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, ok ? "ok" : "FAILED", rebuilt)
    failed << File.basename(file) unless ok
  end
  puts "== stress (#{mode}) durations", *timings
  abort "stress (#{mode}): failed: #{failed.join(", ")}" unless failed.empty?
end

namespace :stress do
  desc "Stress, fault and bad-input suite, short sizes (~5 min; CI)"
  task ci: :compile do
    run_stress("short")
  end
end

desc "Stress, fault and bad-input suite, full sizes (SONDE_STRESS=full, ~15 min)"
task stress: :compile do
  run_stress("full")
end
