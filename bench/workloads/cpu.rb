# frozen_string_literal: true

# cpu: one thread, CPU-bound, with the call depth of a real application (about
# 30 frames: a 20-layer middleware stack, a router, a handler and its helpers).
# The base of the overhead figures: a profiler that slows this down slows
# down every busy web request.
require_relative "../support/workload"
require_relative "cpu_app"

app = build_cpu_app

SondeBench::Workload.measure("cpu") do
  bytes = 0
  SondeBench::Workload.each_round(FULL_SIZE_REQUESTS) do |n|
    _status, _headers, body = call_cpu_app(app, n)
    bytes += body.bytesize
  end
  { threads: 1, bytes: bytes }
end
