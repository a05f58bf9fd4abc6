# frozen_string_literal: true

# Labels under a signal storm, for SECONDS at 1000 Hz: threads that each
# run many fibers switching all the time, every fiber inside its own
# Sonde.with_labels (nested a level deeper every other turn, and left by an
# exception every third), threads born and killed inside labelled blocks,
# and GC running meanwhile. Each fiber burns CPU only under its own labels
# and counts what it burned. Prints one JSON line: Sonde's stats, the CPU
# each fiber measured, and the CPU the profile gives each label set.
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

Sonde.start(rate: 1000)
deadline = monotonic + SECONDS
measured = Hash.new(0.0)
lock = Mutex.new
workers = Array.new(THREADS) do |t|
  Thread.new do
    fibers = Array.new(FIBERS) do |f|
      name = "t#{t}f#{f}"
      Fiber.new do
        Sonde.with_labels(fiber: name) do
          turn = 0
          loop do
            turn += 1
            spent = if turn.even?
                      Sonde.with_labels(depth: "inner") { burn_for(0.001) }
                    else
                      burn_for(0.001)
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
decoded.samples.each { |sample| profiled[sample.labels["fiber"].to_s] += sample.values[cpu] }
puts JSON.generate(stats: profile.stats, threads_born: born, measured: measured,
                   profiled: profiled.transform_values { |ns| ns / 1e9 })
