# frozen_string_literal: true

# Sonde's demo: a small service with three kinds of threads, so that the
# profile has something to say about CPU, waiting and IO.
#   "requests": renders JSON responses (CPU in Ruby and in the json C extension)
#   "reports":  crunches numbers (pure Ruby CPU)
#   "uploads":  waits on a pipe that a slow producer fills (IO, blocked)
# Runs about 3 seconds.
require "json"

DURATION = Float(ENV.fetch("DEMO_SECONDS", "3"))

def deadline
  Process.clock_gettime(Process::CLOCK_MONOTONIC) + DURATION
end

def render_response(id)
  payload = { id: id, items: Array.new(50) { |i| { sku: "sku-#{i}", price: i * 1.5, tags: %w[a b c] } } }
  JSON.parse(JSON.generate(payload))
end

def handle_requests(until_time)
  served = 0
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < until_time
    render_response(served)
    served += 1
    sleep 0.001 if (served % 50).zero? # a brief wait on a "database"
  end
  served
end

def primes_below(limit)
  sieve = Array.new(limit, true)
  sieve[0] = sieve[1] = false
  (2..Math.sqrt(limit)).each do |i|
    (i * i).step(limit - 1, i) { |j| sieve[j] = false } if sieve[i]
  end
  sieve.count(true)
end

def crunch_reports(until_time)
  runs = 0
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < until_time
    primes_below(50_000)
    runs += 1
  end
  runs
end

def receive_uploads(reader)
  bytes = 0
  while (chunk = reader.read(4096))
    bytes += chunk.bytesize
  end
  bytes
end

def produce_uploads(writer, until_time)
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < until_time
    writer.write("x" * 4096)
    sleep 0.05
  end
  writer.close
end

until_time = deadline
reader, writer = IO.pipe
work = {
  "requests" => -> { handle_requests(until_time) },
  "reports" => -> { crunch_reports(until_time) },
  "uploads" => -> { receive_uploads(reader) },
  "producer" => -> { produce_uploads(writer, until_time) },
}
threads = work.to_h do |name, job|
  [name, Thread.new do
    Thread.current.name = name
    job.call
  end]
end
results = threads.transform_values(&:value)
puts "demo: served #{results["requests"]} requests, ran #{results["reports"]} reports, " \
     "received #{results["uploads"]} bytes"
