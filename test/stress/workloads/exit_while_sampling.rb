# frozen_string_literal: true

# Ends the process while Sonde samples at 1000 Hz and threads burn CPU, for
# test/stress/churn_test.rb.
#
#   ruby exit_while_sampling.rb HOW [continuous]
#
# HOW: exit (status 0), exit! (0), abort (1), raise (1, uncaught exception),
# term (SIGTERM to itself: Ruby's default handler exits by the signal),
# kill_threads (Thread.list.each(&:kill) from main: Sonde's threads are not
# in Thread.list, so sampling goes on; then stop, start again, and exit 0).
# With "continuous", in continuous mode exporting to the directory DIR from
# the environment.
require "sonde"

how = ARGV.fetch(0)
options = { rate: 1000 }
options.merge!(continuous: true, every: 1, export: "dir:#{ENV.fetch("DIR")}") if ARGV[1] == "continuous"
Sonde.start(**options)
3.times do
  Thread.new do
    x = 0
    loop do
      x += 1
      Thread.pass if (x % 5_000).zero?
    end
  end
end
sleep 0.05
case how
when "exit" then exit 0
when "exit!" then exit! 0
when "abort" then abort "aborting while sampling"
when "raise" then raise "uncaught while sampling"
when "term" then Process.kill(:TERM, Process.pid) && sleep(5)
when "kill_threads"
  Thread.list.each { |thread| thread.kill unless thread == Thread.current }
  sleep 0.05
  $stderr.puts "running after the kill: #{Sonde.running?}"
  Sonde.stop
  Sonde.start(rate: 1000)
  sleep 0.05
  $stderr.puts "restarted: #{Sonde.running?} #{Sonde.stop.stats[:samples].positive?}"
  exit 0
else abort "unknown #{how}"
end
