# frozen_string_literal: true

# What labels cost a request: a Rack app whose requests do a little work
# (about 50 µs: a template-like string build), called directly, with and
# without Sonde::Middleware in front, while Sonde samples at 100 Hz, in
# shuffled rounds within one process. Measured on the calling thread's own
# CPU clock, so other processes on the machine hardly reach it; the
# fastest round of each is quoted, with the median beside it.
#
#   ruby bench/labels_cost.rb [ROUNDS] [REQUESTS]      (rake bench:labels)
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "sonde"
require "sonde/middleware"

rounds = Integer(ARGV[0] || 30)
requests = Integer(ARGV[1] || 2000)

app = lambda do |env|
  body = +""
  20.times { |i| body << "<li>#{env["PATH_INFO"]} #{i * 7}</li>" }
  [200, { "content-type" => "text/html" }, [body]]
end
variants = {
  "no middleware" => app,
  "Sonde::Middleware" => Sonde::Middleware.new(app),
  "Sonde::Middleware + 3 labels" => Sonde::Middleware.new(app, labels: { tier: "web", region: "eu", shard: "7" })
}
paths = %w[/users/1 /users/2 /orders/9 /items/3].map { |path| { "REQUEST_METHOD" => "GET", "PATH_INFO" => path } }

def thread_cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)

Sonde.start(rate: 100)
times = Hash.new { |hash, key| hash[key] = [] }
random = Random.new(1)
(rounds + 1).times do |round|
  variants.to_a.shuffle(random: random).each do |name, variant|
    started = thread_cpu
    requests.times { |i| variant.call(paths[i % paths.size]) }
    times[name] << (thread_cpu - started) / requests if round.positive? # round 0 warms up
  end
end
stats = Sonde.stop.stats

base = times["no middleware"].min
puts "#{rounds} rounds of #{requests} requests each, Sonde at 100 Hz (#{stats[:cpu_samples]} CPU samples); " \
     "CPU per request on the calling thread"
puts format("  %-30s %10s %10s %8s", "", "fastest", "median", "vs none")
times.each do |name, values|
  sorted = values.sort
  puts format("  %-30s %8.2fµs %8.2fµs %8.3f", name, sorted.first * 1e6, sorted[sorted.size / 2] * 1e6, sorted.first / base)
end
