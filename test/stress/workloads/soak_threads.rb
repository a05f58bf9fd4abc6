# frozen_string_literal: true

# The soak test's application (test/stress/soak_test.rb): 8 threads in 4
# producer/consumer pairs joined by pipes, as bench/workloads/threads.rb,
# but running for a fixed time: producers compute a message and write it,
# consumers block reading it, work on it and nap now and then. A mix of
# running, waiting for the GVL, blocked in IO and sleeping. Profiled in
# continuous mode with the directory exporter the whole time.
#
#   ruby soak_threads.rb SECONDS EXPORT_DIR EVERY
#
# Prints one JSON line: rounds done per second (all threads), threads,
# flusher facts. The work rate is what the test checks stays steady.
require "json"
require "sonde"
require_relative "clock_helpers"

seconds = Float(ARGV.fetch(0))
export_dir = ARGV.fetch(1)
every = Float(ARGV.fetch(2))

PAIRS = 4
MESSAGE_BYTES = 512
NAP_EVERY = 20
NAP_SECONDS = 0.002
WORK_STEPS = 300

def compute(seed)
  value = seed
  WORK_STEPS.times { |i| value = ((value * 33) ^ i) % 65_521 }
  value
end

Sonde.start(continuous: true, every: every, export: "dir:#{export_dir}", service: "soak", rate: 200,
            tags: { "test" => "soak" })
$stdout.sync = true
rounds = Array.new(PAIRS * 2, 0)
stop = false
threads = Array.new(PAIRS) do |pair|
  reader, writer = IO.pipe
  producer = Thread.new do
    Thread.current.name = "producer-#{pair}"
    n = 0
    until stop
      writer.write("#{compute(n).to_s.rjust(MESSAGE_BYTES - 1, "0")}\n")
      n += 1
      rounds[pair * 2] += 1
    end
  ensure
    writer.close
  end
  consumer = Thread.new do
    Thread.current.name = "consumer-#{pair}"
    count = 0
    while (line = reader.gets)
      compute(line.to_i)
      count += 1
      rounds[(pair * 2) + 1] += 1
      sleep(NAP_SECONDS) if (count % NAP_EVERY).zero?
    end
  end
  [producer, consumer]
end.flatten

started = monotonic
per_second = []
last = 0
while (elapsed = monotonic - started) < seconds
  sleep([1.0 - (elapsed % 1.0), seconds - elapsed].min)
  total = rounds.sum
  per_second << (total - last)
  last = total
end
stop = true
threads.each(&:join)
stopped = monotonic
Sonde.stop # exports the last period and waits for the exporter
puts JSON.generate(seconds: stopped - started, rounds_per_second: per_second, rounds: rounds.sum,
                   stop_seconds: monotonic - stopped, stats: Sonde.stats)
