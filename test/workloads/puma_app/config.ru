# frozen_string_literal: true

# A Rack app for test/puma_test.rb: each request burns a known amount of
# CPU in `handle_request` (its own thread CPU clock says how much), then
# answers. Served by Puma in cluster mode, with Sonde loaded by
# RUBYOPT=-rsonde/auto in the master and restarted in every worker.
BURN_SECONDS = Float(ENV.fetch("APP_BURN_MS", "2")) / 1000

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def checksum(text)
  sum = 0
  text.each_byte { |byte| sum = (sum * 31 + byte) & 0xffffffff }
  sum
end

def handle_request(path)
  started = thread_cpu
  sum = 0
  sum = (sum + checksum(path * 20)) & 0xffffffff while thread_cpu - started < BURN_SECONDS
  sum
end

run lambda { |env|
  body = "#{Process.pid} #{handle_request(env["PATH_INFO"])}\n"
  [200, { "content-type" => "text/plain" }, [body]]
}
