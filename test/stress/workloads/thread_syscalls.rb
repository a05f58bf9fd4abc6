# frozen_string_literal: true

# What each thread costs in system calls, for
# test/stress/thread_syscalls_test.rb (run under `strace -f -c`).
#
#   ruby thread_syscalls.rb sonde|stopped|control COUNT
#
# Starts and joins COUNT threads, one after another, each doing a little
# work, under Sonde at 10 Hz without a timeline ("sonde"), after a run of
# Sonde that stopped ("stopped": its native part loaded, its thread hooks
# in place), or without Sonde ("control"). Prints one JSON line: the
# threads made and Sonde's stats.
#
# 10 Hz, not the default 100: what a tick costs in calls (the trigger's
# signal, and the clocks the trigger and the pass read) grows with the
# run's length, not with its threads, and under
# strace on a loaded machine the run of 3,000 threads lasts seconds longer
# than the one of 1,000: at 100 Hz those calls read as the threads' own.
require "json"

mode, count = ARGV
abort "usage: thread_syscalls.rb sonde|stopped|control COUNT" unless %w[sonde stopped control].include?(mode) && count
count = Integer(count)
require "sonde" unless mode == "control"
Sonde.start(rate: 10, timeline: false) unless mode == "control"
Sonde.stop if mode == "stopped"
count.times { Thread.new { Array.new(8) { |k| k * k }.sum }.join }
facts = { ruby: RUBY_VERSION, mode: mode, threads: count }
facts[:threads_ended] = Sonde.stop.stats[:threads_ended] if mode == "sonde"
puts JSON.generate(facts)
