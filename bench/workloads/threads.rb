# frozen_string_literal: true

# threads: 8 threads in 4 producer/consumer pairs joined by pipes. Producers
# compute a message and write it; consumers block reading it, work on it,
# and nap now and then. A mix of running, waiting for the GVL, blocked in IO
# and sleeping: the picture a threaded server gives a wall-clock profiler.
require_relative "../support/workload"

PAIRS = 4
FULL_SIZE_MESSAGES = 3_500 # per pair
MESSAGE_BYTES = 512
NAP_EVERY = 20 # consumer rounds between naps
NAP_SECONDS = 0.002
WORK_STEPS = 300

def compute(seed)
  value = seed
  WORK_STEPS.times { |i| value = ((value * 33) ^ i) % 65_521 }
  value
end

def produce(writer)
  SondeBench::Workload.each_round(FULL_SIZE_MESSAGES) do |n|
    line = compute(n).to_s.rjust(MESSAGE_BYTES - 1, "0")
    writer.write("#{line}\n")
  end
ensure
  writer.close
end

def consume(reader)
  total = 0
  rounds = 0
  while (line = reader.gets)
    total += compute(line.to_i)
    rounds += 1
    sleep(NAP_SECONDS) if (rounds % NAP_EVERY).zero?
  end
  total
end

SondeBench::Workload.measure("threads") do
  threads = Array.new(PAIRS) do |pair|
    reader, writer = IO.pipe
    [Thread.new { Thread.current.name = "producer-#{pair}"; produce(writer) },
     Thread.new { Thread.current.name = "consumer-#{pair}"; consume(reader) }]
  end.flatten
  threads.each(&:join)
  { threads: threads.size + 1 }
end
