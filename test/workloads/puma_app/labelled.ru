# frozen_string_literal: true

# A Rack app for test/puma_test.rb's endpoint test: Sonde::Middleware labels
# each request with its endpoint; /light burns APP_BURN_MS of the thread's
# CPU and /heavy four times as much, so the profiles' CPU per endpoint must
# come out 1:4. /debug/pprof serves live captures (Sonde::PprofApp).
require "sonde/middleware"
require "sonde/pprof_app"

BURN_SECONDS = Float(ENV.fetch("APP_BURN_MS", "1")) / 1000
COST = { "light" => 1, "heavy" => 4 }.freeze

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def handle_request(seconds)
  started = thread_cpu
  x = 0
  x += 1 while thread_cpu - started < seconds
  x
end

# A live profile of this worker, with the test's token.
map("/debug/pprof") { run Sonde::PprofApp.new(token: ENV.fetch("SONDE_PPROF_TOKEN"), max_seconds: 10) }

use Sonde::Middleware
run lambda { |env|
  cost = COST.fetch(env["PATH_INFO"].split("/")[1], 0)
  [200, { "content-type" => "text/plain" }, ["#{Process.pid} #{handle_request(cost * BURN_SECONDS)}\n"]]
}
