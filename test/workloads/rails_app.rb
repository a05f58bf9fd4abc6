# frozen_string_literal: true

# A real Rails application (Debian's Rails 6.1: railties, actionpack,
# activejob), booted in this process with Sonde's Railtie configured from
# config.sonde: two endpoints whose CPU cost is 1:4 and two jobs, driven
# through the full middleware stack and router (Rack::MockRequest) and the
# inline queue adapter. Prints one JSON line: what really ran, per endpoint
# and job (thread CPU clocks), the middleware stack, and where the profile is.
#
# A stand-in for a tracer's Rack middleware (the parts of Datadog's tracing
# API Sonde reads) sits *after* Sonde's in the stack, as a tracer's may:
# Sonde's middleware sees no span, the controller labels do. Each request's
# span id is 0x5000 + its number; every request is its trace's local root.
require "json"
require "logger"
require "rails"
require "action_controller/railtie"
require "active_job/railtie"
require "sonde" # after Rails, as Bundler.require does: Sonde's Railtie loads

out = ARGV.fetch(0)
$spent = Hash.new(0.0)

def burn(seconds)
  started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started < seconds
  x
end

def measured(name)
  started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  yield
ensure
  $spent[name] += Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started
end

module Datadog
  module Tracing
    Span = Struct.new(:id, :trace_id)
    class << self
      attr_accessor :active_span
      def active_trace = nil
    end

    class FakeTraceMiddleware
      def initialize(app)
        @app = app
        @requests = 0
      end

      def call(env)
        @requests += 1
        Tracing.active_span = Span.new(0x5000 + @requests, 0xabc)
        @app.call(env)
      ensure
        Tracing.active_span = nil
      end
    end
  end
end

module Shop
  class Application < Rails::Application
    config.eager_load = false
    config.logger = Logger.new(nil)
    config.secret_key_base = "sonde-test"
    config.hosts.clear
    config.active_job.queue_adapter = :inline
    config.sonde.start = true
    config.sonde.rate = 250
    config.middleware.use Datadog::Tracing::FakeTraceMiddleware
    routes.append do
      get "/users/:id" => "users#show"
      post "/orders" => "orders#create"
    end
  end
end

class UsersController < ActionController::Base
  def show
    measured("UsersController#show") { burn(0.004) }
    render plain: "user #{params[:id]}"
  end
end

class OrdersController < ActionController::API
  def create
    measured("OrdersController#create") { burn(0.016) }
    render plain: "ok"
  end
end

class ImportJob < ActiveJob::Base
  queue_as :bulk
  def perform(ms) = measured("ImportJob") { burn(ms / 1000.0) }
end

class MailJob < ActiveJob::Base
  def perform(ms) = measured("MailJob") { burn(ms / 1000.0) }
end

Rails.application.initialize!
started_by_railtie = Sonde.running?
service = Sonde.configuration.dig(:service, :value)
request = Rack::MockRequest.new(Rails.application)
40.times do |i|
  response = request.get("/users/#{i}")
  raise "GET /users: #{response.status}" unless response.status == 200

  response = request.post("/orders", input: "")
  raise "POST /orders: #{response.status}" unless response.status == 200
end
10.times do
  ImportJob.perform_later(24)
  MailJob.perform_now(8)
end
Sonde.stop.write(out)
puts JSON.generate(spent: $spent, started_by_railtie: started_by_railtie, service: service,
                   env: Sonde.configuration.dig(:env, :value),
                   middleware: Rails.application.middleware.map(&:inspect))
