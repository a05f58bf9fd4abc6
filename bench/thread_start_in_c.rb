# frozen_string_literal: true

# The control for bench/thread_start_in_process.rb: does one more thread
# that only sleeps slow a C program's thread starts too, or only Ruby's?
# Compiles bench/support/c/thread_starts.c (cc, into tmp/bench/) and runs
# it as the machine schedules it and pinned to one CPU, as the Ruby slices
# run; prints a Markdown table per placement.
#
#   ruby bench/thread_start_in_c.rb [ROUNDS] [THREADS_PER_SLICE]   (60, 2000; under a minute)
require "fileutils"

root = File.expand_path("..", __dir__)
source = File.join(root, "bench", "support", "c", "thread_starts.c")
binary = File.join(root, "tmp", "bench", "thread_starts")
FileUtils.mkdir_p(File.dirname(binary))
system("cc", "-O2", "-Wall", "-Werror", "-pthread", "-o", binary, source, exception: true)
rounds = Integer(ARGV.fetch(0, "60"))
threads = Integer(ARGV.fetch(1, "2000"))
{ "as scheduled" => [], "pinned to one CPU" => %w[taskset -c 0] }.each do |placement, prefix|
  puts "#{placement}: #{rounds} rounds of #{threads} threads per kind, shuffled in each round", "",
       "| kind | CPU per thread (us) | / none (paired median) |", "|---|---|---|"
  output = IO.popen([*prefix, binary, rounds.to_s, threads.to_s], &:read)
  abort "thread_starts (#{placement}) failed" unless $?.success?
  puts output, ""
end
