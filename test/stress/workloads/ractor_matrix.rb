# frozen_string_literal: true

# The Ractor crash matrix on the Ruby that runs this, for
# test/stress/ractors_test.rb (which runs it on the host's Ruby and, through
# script/ruby, on 3.3 and 3.4): test/stress/workloads/ractors.rb, each
# configuration RUNS times in its own process, and the same program without
# Sonde as the control.
#
#   ruby ractor_matrix.rb RUNS SECONDS
#
# Prints one JSON line: for each configuration, the runs, the crashes (a
# signal or a non-zero exit) with the stderr of each (Ruby's [BUG] report
# carries the C backtrace), and the runs whose profile did not say what it
# left out.
require "json"
require "rbconfig"

RUNS = Integer(ARGV.fetch(0))
SECONDS = ARGV.fetch(1)
WORKLOAD = File.join(__dir__, "ractors.rb")
LIB = File.expand_path("../../../lib", __dir__)
RUN_TIMEOUT = 60

CONFIGS = [
  %w[sonde 100 cpu plain], %w[sonde 100 alloc plain], %w[sonde 100 heap plain],
  %w[sonde 1000 cpu plain], %w[sonde 1000 alloc plain], %w[sonde 1000 heap plain],
  %w[sonde 1000 cpu compact], %w[sonde 1000 heap compact], %w[sonde 1000 heap flush],
  %w[control 1000 cpu compact],
].freeze

# A hung run is sent SIGSEGV first: Ruby's handler prints its [BUG] report
# (the C backtrace of the thread the signal reached, mostly the main one,
# and its Ruby backtrace) into the run's stderr, which says where it hung;
# SIGKILL follows if the handler does not end the process.
def report_and_kill(pid)
  Process.kill(:SEGV, pid)
  REPORT_WAIT_STEPS.times do
    return if Process.waitpid(pid, Process::WNOHANG)

    sleep 0.1
  end
  Process.kill(:KILL, pid)
  Process.waitpid(pid)
rescue Errno::ESRCH, Errno::ECHILD
  nil
end
REPORT_WAIT_STEPS = 50

# [stdout, stderr, Process::Status or nil when it hung and was killed]
def run_once(config)
  out_read, out_write = IO.pipe
  err_read, err_write = IO.pipe
  # Without RubyGems (the workload uses none): 100 runs per Ruby, each
  # spared about 50 ms of start-up.
  pid = Process.spawn(RbConfig.ruby, "--disable-gems", "-I#{LIB}", WORKLOAD, *config, SECONDS, out: out_write, err: err_write)
  out_write.close
  err_write.close
  readers = [Thread.new { out_read.read }, Thread.new { err_read.read }]
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + RUN_TIMEOUT
  status = nil
  loop do
    _, status = Process.waitpid2(pid, Process::WNOHANG)
    break if status
    if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      report_and_kill(pid)
      break
    end
    sleep 0.02
  end
  [readers[0].value, readers[1].value, status]
end

# Ruby's [BUG] report up to its C backtrace's end (the memory map and the
# loaded features after it run to hundreds of kilobytes), or all of stderr.
def crash_report(stderr)
  start = stderr.index("[BUG]") || 0
  stop = stderr.index("-- Other runtime information", start) || stderr.size
  stderr[start...stop][0, 40_000]
end

# The stats of a Sonde run count the four Ractors it left out, and its
# profile says how many ran and how much CPU that was. With flushes the
# profile is the last period only, which the Ractors may have ended before:
# then it rightly has no such note.
def accounted?(stdout, flushed)
  facts = JSON.parse(stdout.lines.last.to_s)
  notes = facts.fetch("comments").grep(/: [1-4] other Ractors? ran; this profile holds [\d.]+ s of the process's/)
  facts.dig("stats", "other_ractors") == 4 && (flushed ? notes.size <= 1 : notes.size == 1)
rescue JSON::ParserError, KeyError, NoMethodError
  false
end

results = CONFIGS.map do |config|
  crashes = []
  unaccounted = 0
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  RUNS.times do
    stdout, stderr, status = run_once(config)
    if status.nil? || !status.success?
      what = status.nil? ? "hung (killed after #{RUN_TIMEOUT} s)" : status.inspect
      crashes << "#{what}\n#{crash_report(stderr)}"
    elsif config.first == "sonde" && !accounted?(stdout, config.last == "flush")
      unaccounted += 1
    end
  end
  { config: config.join(" "), runs: RUNS, crashes: crashes, unaccounted: unaccounted,
    seconds: (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started).round(1) }
end
puts JSON.generate(ruby: RUBY_VERSION, results: results)
