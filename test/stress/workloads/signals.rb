# frozen_string_literal: true

# SIGPROF ownership scenarios, for test/stress/signals_test.rb. Needs
# foreign_sigprof (a C extension standing in for another library's handler)
# on the load path. Each scenario prints one JSON line of facts.
#
#   ruby signals.rb c_handler_before_start
#   ruby signals.rb c_handler_while_running
#   ruby signals.rb trap_while_running
#   ruby signals.rb trap_then_default_while_running
#   ruby signals.rb stackprof_while_running
#   ruby signals.rb ignored_before_start
#   ruby signals.rb kill_while_running
#   ruby signals.rb kill_after_stop
#   ruby signals.rb kill_before_start  (dies of SIGPROF, as a Ruby without Sonde)
require "json"
require "sonde"
require "foreign_sigprof"
require_relative "clock_helpers"

# Sends SIGPROF to this process and gives the handler time to run.
def kill_self(times = 1)
  times.times { Process.kill(:PROF, Process.pid) }
  sleep 0.05
end

def try_start(**options)
  Sonde.start(**options)
  "started"
rescue Sonde::SignalConflictError => e
  "refused: #{e.message}"
end

# What Sonde did while someone else held SIGPROF.
def record_during(facts, before, during)
  %i[signals_sent signals_received samples idle_samples].each do |key|
    facts[:"#{key}_during"] = during[key] - before[key]
  end
  facts[:signal_handler_lost] = during[:signal_handler_lost]
  facts[:running_during] = Sonde.running?
end

facts = {}
case ARGV.fetch(0)
when "c_handler_before_start"
  ForeignSigprof.install
  facts[:before] = ForeignSigprof.disposition
  facts[:start] = try_start(rate: 1000)
  facts[:after] = ForeignSigprof.disposition
  facts[:still_installed] = ForeignSigprof.installed?
  kill_self
  facts[:count_after_kill] = ForeignSigprof.count
  # What the error suggests: without signals Sonde runs beside the handler,
  # sends it nothing, and leaves it as it was.
  facts[:no_signals_start] = try_start(rate: 1000, signals: false)
  spin(0.2)
  facts[:no_signals_samples] = Sonde.stop.stats[:samples]
  facts[:count_after_no_signals_run] = ForeignSigprof.count
  facts[:installed_after_no_signals_run] = ForeignSigprof.installed?
when "c_handler_while_running"
  Sonde.start(rate: 1000)
  spin(0.2)
  before = Sonde.stats
  ForeignSigprof.install # another library takes SIGPROF over while Sonde runs
  spin(0.5)
  during = Sonde.stats
  facts[:foreign_count_during] = ForeignSigprof.count
  record_during(facts, before, during)
  Sonde.stop
  facts[:installed_after_stop] = ForeignSigprof.installed?
  count = ForeignSigprof.count
  kill_self
  facts[:foreign_fired_after_stop] = ForeignSigprof.count - count
  facts[:restart] = try_start(rate: 1000)
when "trap_while_running"
  trapped = 0
  Sonde.start(rate: 1000)
  spin(0.2)
  before = Sonde.stats
  facts[:trap_returned] = trap("PROF") { trapped += 1 }.inspect
  spin(0.5)
  during = Sonde.stats
  facts[:trapped_during] = trapped
  record_during(facts, before, during)
  Sonde.stop
  facts[:disposition_after_stop] = ForeignSigprof.disposition
  count = trapped
  kill_self
  facts[:trap_fired_after_stop] = trapped - count
  facts[:restart] = try_start(rate: 1000)
when "trap_then_default_while_running"
  # A library takes SIGPROF over, then resets it to the default: a signal
  # sent now would kill the process ("Profiling timer expired").
  Sonde.start(rate: 1000)
  spin(0.2)
  before = Sonde.stats
  trap("PROF") { nil }
  trap("PROF", "SYSTEM_DEFAULT")
  facts[:disposition_during] = ForeignSigprof.disposition
  spin(0.5)
  record_during(facts, before, Sonde.stats)
  facts[:samples] = Sonde.stop.stats[:samples]
  facts[:disposition_after_stop] = ForeignSigprof.disposition
  facts[:alive] = true
when "stackprof_while_running"
  require "stackprof"
  Sonde.start(rate: 1000)
  spin(0.2)
  before = Sonde.stats
  # StackProf installs its handler without looking, then sets SIGPROF to SIG_IGN at stop.
  StackProf.start(mode: :cpu, interval: 10_000) # 100 Hz of its own
  spin(0.5)
  StackProf.stop
  facts[:stackprof_samples] = StackProf.results[:samples]
  spin(0.2)
  record_during(facts, before, Sonde.stats)
  Sonde.stop
  facts[:disposition_after_stop] = ForeignSigprof.disposition
  facts[:alive] = true
when "ignored_before_start"
  trap("PROF", "IGNORE")
  facts[:start] = try_start(rate: 1000)
  spin(0.2)
  facts[:samples] = Sonde.stop.stats[:samples]
  facts[:disposition_after_stop] = ForeignSigprof.disposition
  kill_self(5)
  facts[:alive] = true
when "kill_while_running"
  Sonde.start(rate: 1000)
  killer = Thread.new { 200.times { Process.kill(:PROF, Process.pid) && sleep(0.001) } }
  spin(0.3)
  killer.join
  stats = Sonde.stop.stats
  facts[:samples] = stats[:samples]
  facts[:signals_received] = stats[:signals_received]
  facts[:signals_sent] = stats[:signals_sent]
  facts[:alive] = true
when "kill_after_stop"
  # After a normal stop, after a stop that reports a sampling failure, and
  # after a run without signals that followed one with them.
  Sonde.start(rate: 1000)
  spin(0.1)
  Sonde.stop
  kill_self(5)
  Sonde.start(rate: 1000)
  spin(0.05)
  Sonde::Native::Testing.fail_next_sample
  spin(0.1)
  begin
    Sonde.stop
  rescue Sonde::SamplingError
    facts[:failure_reported] = true
  end
  kill_self(5)
  Sonde.start(rate: 1000, signals: false)
  spin(0.05)
  Sonde.stop
  kill_self(5)
  facts[:disposition_after_stop] = ForeignSigprof.disposition
  facts[:alive] = true
when "kill_before_start"
  facts[:disposition_before_start] = ForeignSigprof.disposition
  $stdout.puts JSON.generate(facts)
  $stdout.flush
  kill_self
  facts[:alive] = true
else
  abort "unknown scenario #{ARGV[0]}"
end
puts JSON.generate(facts)
