# frozen_string_literal: true

# labels: what labels cost a Rack request. Two Rack apps, a tiny one (about
# 10 µs a request: twenty list items) and a page (about 0.5 ms: a 400-row
# table), each called directly with and without Sonde::Middleware in front
# (which labels every request with its endpoint), with three more fixed
# labels, and with a trace context of its own per request, while Sonde samples at 100 Hz; plus the bare app a second time, the
# A/A control that says how far two identical variants drift apart here. In
# shuffled rounds within one process, on the calling thread's CPU clock, so
# other processes on the machine hardly reach it; the fastest round and the
# median of each are kept. bench/labels_cost.rb prints the same as a table.
require_relative "../support/workload"
require "sonde"
require "sonde/middleware"

FULL_SIZE_ROUNDS = 100 # 30 at the full run's work scale (0.3)
RATE_HZ = 100
# Requests per round and app: about 20 ms of work each.
REQUESTS = { "tiny" => 2000, "page" => 40 }.freeze
ROWS = { "tiny" => 20, "page" => 400 }.freeze
CONTROL = "no middleware, again (A/A)"

def rack_app(rows)
  lambda do |env|
    body = +"<table>"
    rows.times { |i| body << "<tr><td>#{env["PATH_INFO"]}</td><td>#{i * 7}</td><td>#{(i * 31) % 97}</td></tr>" }
    [200, { "content-type" => "text/html" }, [body << "</table>"]]
  end
end

# The last variant runs each request in a span of its own, as under a
# tracer: what Sonde adds per request (packing the ids, two switches of the
# thread's context), not what the tracer's own lookup costs.
def variants(app)
  middleware = Sonde::Middleware.new(app)
  span = 0
  {
    "no middleware" => app,
    CONTROL => app,
    "Sonde::Middleware" => middleware,
    "Sonde::Middleware + 3 labels" => Sonde::Middleware.new(app, labels: { tier: "web", region: "eu", shard: "7" }),
    "Sonde::Middleware + a span" => lambda do |env|
      Sonde.with_trace_context(trace_id: span += 1, span_id: span) { middleware.call(env) }
    end
  }
end

PATHS = %w[/users/1 /users/2 /orders/9 /items/3].map { |path| { "REQUEST_METHOD" => "GET", "PATH_INFO" => path } }.freeze

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

SondeBench::Workload.measure("labels") do
  apps = ROWS.to_h { |name, rows| [name, variants(rack_app(rows))] }
  times = Hash.new { |hash, key| hash[key] = [] }
  random = Random.new(1)
  Sonde.start(rate: RATE_HZ)
  apps.each { |_name, list| list.each_value { |variant| 50.times { |i| variant.call(PATHS[i % PATHS.size]) } } } # warm up
  rounds = SondeBench::Workload.each_round(FULL_SIZE_ROUNDS) do
    apps.flat_map { |app, list| list.map { |variant, callable| [app, variant, callable] } }.shuffle(random: random)
        .each do |app, variant, callable|
      count = REQUESTS.fetch(app)
      started = thread_cpu
      count.times { |i| callable.call(PATHS[i % PATHS.size]) }
      times[[app, variant]] << (thread_cpu - started) / count
    end
  end
  stats = Sonde.stop.stats
  per_request = ROWS.keys.to_h do |app|
    [app, variants(nil).keys.to_h do |variant|
      sorted = times[[app, variant]].sort
      [variant, { "fastest_s" => sorted.first, "median_s" => sorted[sorted.size / 2] }]
    end]
  end
  { threads: 1, rounds: rounds, rate_hz: RATE_HZ, cpu_samples: stats[:cpu_samples], control: CONTROL,
    rows: ROWS, per_request_s: per_request }
end
