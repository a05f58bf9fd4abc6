# frozen_string_literal: true

# Labels under a signal storm, for SECONDS at 1000 Hz: threads that each
# run many fibers switching all the time, every fiber inside its own
# Sonde.with_labels (nested a level deeper every other turn, and left by an
# exception every third), threads born and killed inside labelled blocks,
# and GC running meanwhile. Each fiber burns CPU only under its own labels
# and counts what it burned. Each turn also runs in a trace context of its
# own, every id of it (trace id's low half, span id, local root) the same
# number, (fiber number << 32) | turn: a sample whose ids disagree, or
# name another fiber, was torn or misread. Prints one JSON line: Sonde's
# stats, the CPU each fiber measured, the CPU the profile gives each label
# set, and how many samples had torn or foreign trace contexts.
require "json"
require "sonde"
require "sonde/pprof"

SECONDS = Float(ARGV.fetch(0, "3"))
out = ARGV.fetch(1)
THREADS = 3
FIBERS = 8

def thread_cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def burn_for(seconds)
  started = thread_cpu
  x = 0
  x += 1 while thread_cpu - started < seconds
  thread_cpu - started
end

NAMES = [] # fiber number -> its label
Sonde.start(rate: 1000)
deadline = monotonic + SECONDS
measured = Hash.new(0.0)
lock = Mutex.new
workers = Array.new(THREADS) do |t|
  Thread.new do
    fibers = Array.new(FIBERS) do |f|
      name = "t#{t}f#{f}"
      number = (t * FIBERS) + f + 1
      Fiber.new do
        Sonde.with_labels(fiber: name) do
          turn = 0
          loop do
            turn += 1
            id = (number << 32) | turn
            spent = Sonde.with_trace_context(trace_id: id, span_id: id, local_root_span_id: id) do
              if turn.even?
                Sonde.with_labels(depth: "inner") { burn_for(0.001) }
              else
                burn_for(0.001)
              end
            end
            lock.synchronize { measured[name] += spent }
            begin
              Sonde.with_labels(raised: "yes") { raise "out" } if (turn % 3).zero?
            rescue RuntimeError
              nil
            end
            Fiber.yield
          end
        end
      end
    end
    fibers.each(&:resume) while monotonic < deadline
    NAMES[(t * FIBERS) + 1, FIBERS] = Array.new(FIBERS) { |f| "t#{t}f#{f}" }
  end
end
churn = Thread.new do
  born = 0
  while monotonic < deadline
    Thread.new { Sonde.with_labels(short: "lived") { 200.times { |i| i.to_s } } }.join
    GC.start if (born += 1) % 20 == 0
  end
  born
end
workers.each(&:join)
born = churn.value
profile = Sonde.stop
profile.write(out)
decoded = Sonde::Pprof.decode(profile.pprof)
cpu = decoded.value_index("cpu-time")
profiled = Hash.new(0)
traced = torn = foreign = 0
decoded.samples.each do |sample|
  profiled[sample.labels["fiber"].to_s] += sample.values[cpu]
  next unless (span = sample.labels["span_id"])

  traced += 1
  ids = sample.labels.values_at("trace_id", "span_id", "local_root_span_id").map { |hex| hex.to_i(16) }
  torn += 1 unless ids.uniq.size == 1
  foreign += 1 unless NAMES[span.to_i(16) >> 32] == sample.labels["fiber"]
end
puts JSON.generate(stats: profile.stats, threads_born: born, measured: measured,
                   profiled: profiled.transform_values { |ns| ns / 1e9 },
                   traced_samples: traced, torn_traces: torn, foreign_traces: foreign)
