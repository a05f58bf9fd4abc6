# frozen_string_literal: true

# A fork storm under sampling at 1000 Hz, for test/stress/fork_storm_test.rb.
#
#   ruby fork_storm.rb FORKS
#
# While a thread burns CPU, the main thread forks FORKS children, up to
# CONCURRENT at a time, through fork, Process.fork and IO.popen("-"). Each
# child checks that it is sampling, works, and every third one starts a
# thread and forks a grandchild while that thread runs. Children and
# grandchildren end in different ways: Sonde.stop then exit, exit with Sonde
# still running (at_exit), exit! (no at_exit). Each reports on a pipe; the
# parent waits for every child. Prints one JSON line: every status seen,
# every report.
require "json"
require "sonde"
require_relative "clock_helpers"

FORKS = Integer(ARGV.fetch(0))
CONCURRENT = 5

def describe(status)
  { "pid" => status.pid, "exitstatus" => status.exitstatus, "termsig" => status.termsig }
end

# Writes one report line (under PIPE_BUF, so lines never interleave).
def report(writer, facts)
  writer.write("#{JSON.generate(facts)}\n")
end

# How a process ends: way picks one of three. Returns only for exit
# with Sonde running, where at_exit ends it.
def finish(way, writer, facts)
  case way % 3
  when 0
    facts["samples"] = Sonde.stop.stats[:samples]
    report(writer, facts)
    exit 0
  when 1
    report(writer, facts)
    exit 0
  else
    report(writer, facts)
    writer.flush
    exit! 0
  end
end

def grandchild(i, writer)
  facts = { "kind" => "grandchild", "i" => i, "pid" => Process.pid, "running" => Sonde.running? }
  spin(0.02)
  finish(i / 3 + 1, writer, facts)
end

def child(i, writer)
  facts = { "kind" => "child", "i" => i, "pid" => Process.pid, "running" => Sonde.running? }
  spin(0.02)
  if (i % 3).zero?
    worker = Thread.new { spin(0.05) }
    pid = fork { grandchild(i, writer) }
    _, status = Process.wait2(pid)
    facts["grandchild"] = describe(status)
    worker.join
  end
  finish(i / 3, writer, facts)
end

Sonde.start(rate: 1000, overhead_target: 20)
stop = false
busy = Thread.new do
  x = 0
  until stop
    x += 1
    Thread.pass if (x % 20_000).zero?
  end
end

reader, writer = IO.pipe
statuses = []
popen_outputs = []
running = {}
started = monotonic
FORKS.times do |i|
  if running.size >= CONCURRENT
    pid, status = Process.wait2
    running.delete(pid)
    statuses << describe(status)
  end
  case i % 4
  when 0, 1 then pid = fork { child(i, writer) }
  when 2 then pid = Process.fork { child(i, writer) }
  else
    io = IO.popen("-")
    if io.nil?
      $stdout.write("popen child #{Process.pid}")
      child(i, writer)
    end
    popen_outputs << io.read
    io.close # waits for the child; its status is in $?
    statuses << describe($?)
    next
  end
  running[pid] = true
end
running.each_key do |pid|
  _, status = Process.wait2(pid)
  statuses << describe(status)
end
seconds = monotonic - started
writer.close
reports = reader.each_line.map { |line| JSON.parse(line) }
stop = true
busy.join
parent_stats = Sonde.stop.stats

puts JSON.generate(
  forks: FORKS, seconds: seconds, statuses: statuses, reports: reports,
  popen_outputs: popen_outputs, parent_samples: parent_stats[:samples]
)
