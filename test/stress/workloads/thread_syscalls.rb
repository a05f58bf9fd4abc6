# frozen_string_literal: true

# What each thread costs in system calls, for
# test/stress/thread_syscalls_test.rb (run under `strace -f -c`).
#
#   ruby thread_syscalls.rb sonde|control COUNT
#
# Starts and joins COUNT threads, one after another, each doing a little
# work, under Sonde at 100 Hz without a timeline ("sonde") or without Sonde
# ("control"). Prints one JSON line: the threads made and Sonde's stats.
require "json"

mode, count = ARGV
abort "usage: thread_syscalls.rb sonde|control COUNT" unless %w[sonde control].include?(mode) && count
count = Integer(count)
if mode == "sonde"
  require "sonde"
  Sonde.start(rate: 100, timeline: false)
end
count.times { Thread.new { Array.new(8) { |k| k * k }.sum }.join }
facts = { ruby: RUBY_VERSION, mode: mode, threads: count }
facts[:threads_ended] = Sonde.stop.stats[:threads_ended] if mode == "sonde"
puts JSON.generate(facts)
