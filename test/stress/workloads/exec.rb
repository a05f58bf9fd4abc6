# frozen_string_literal: true

# exec, system and spawn into non-Ruby programs while sampling at 1000 Hz,
# for test/stress/fork_storm_test.rb.
#
#   ruby exec.rb exec PROGRAM...    sample, burn CPU in two threads, then
#                                   exec(PROGRAM...): this process's status
#                                   is the program's
#   ruby exec.rb thread_exec PROGRAM... the same, exec called from a thread
#                                   that is not the main thread
#   ruby exec.rb fork_exec N        N times: fork a child (which samples)
#                                   that execs `sh -c 'exit 3'`
#   ruby exec.rb system N           N times: system / spawn `sh -c 'exit 3'`
#                                   and /bin/true from a sampling process
#
# The last two print one JSON line with every status seen.
require "json"
require "sonde"
require_relative "clock_helpers"

def describe(status)
  { "exitstatus" => status.exitstatus, "termsig" => status.termsig }
end

mode = ARGV.shift
Sonde.start(rate: 1000, overhead_target: 20)
# A second thread holds the GVL half the time, so that exec and fork happen
# while signals go to either thread.
stop = false
busy = Thread.new do
  x = 0
  until stop
    x += 1
    Thread.pass if (x % 5_000).zero?
  end
end

case mode
when "exec"
  spin(0.05)
  exec(*ARGV)
when "thread_exec"
  Thread.new do
    spin(0.05)
    exec(*ARGV)
  end.join
when "fork_exec"
  statuses = Array.new(Integer(ARGV.fetch(0))) do
    pid = fork do
      spin(0.01)
      exec("sh", "-c", "exit 3")
    end
    describe(Process.wait2(pid).last)
  end
when "system"
  statuses = Array.new(Integer(ARGV.fetch(0))).flat_map do
    spin(0.005)
    system("sh", "-c", "exit 3")
    by_system = describe($?)
    spawned = describe(Process.wait2(Process.spawn("/bin/true")).last)
    [by_system, spawned]
  end
else
  abort "unknown mode #{mode}"
end
stop = true
busy.join
samples = Sonde.stop.stats[:samples]
puts JSON.generate(statuses: statuses, samples: samples)
