# frozen_string_literal: true

require_relative "support/test_helper"

# Sonde::Sinatra in a real Sinatra app (Debian's ruby-sinatra): each route
# runs under its method and pattern, in the proportion of CPU the app
# measured on its own thread clock.
class SinatraTest < Minitest::Test
  include SondeTestHelper

  RATIO_TOLERANCE = 0.25

  def setup
    skip_unless_loadable(%w[sinatra/base], "Sinatra is not installed for this Ruby (script/setup installs Debian's ruby-sinatra)")
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "POST /orders" +0.6% to +4.0% of ±25%.
  statistical def test_each_route_is_labelled_with_its_pattern
    Dir.mktmpdir do |dir|
      out = File.join(dir, "sinatra.pprof")
      stdout, stderr, status = run_ruby("-rjson", "-e", <<~RUBY, gems: true)
        require "sinatra/base"
        require "sonde"
        require "sonde/middleware"
        require "sonde/sinatra"
        $spent = Hash.new(0.0)
        def burn(route, seconds)
          started = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
          x = 0
          x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started < seconds
          $spent[route] += Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - started
        end
        class Shop < Sinatra::Base
          use Sonde::Middleware
          register Sonde::Sinatra
          set :host_authorization, { permitted_hosts: [] } if respond_to?(:host_authorization)
          get("/users/:id") { burn("GET /users/:id", 0.004); "user \#{params[:id]}" }
          post("/orders") { burn("POST /orders", 0.016); halt 201, "created" }
        end
        request = Rack::MockRequest.new(Shop)
        Sonde.start(rate: 250)
        40.times do |i|
          raise "GET" unless request.get("/users/\#{i}").status == 200
          raise "POST" unless request.post("/orders").status == 201
        end
        Sonde.stop.write(#{out.inspect})
        puts JSON.generate($spent)
      RUBY
      assert_succeeded status, stderr
      spent = JSON.parse(stdout.lines.last)
      profile = Sonde::Pprof.read(out)
      # Over the samples in Object#burn, the app's measured truth (Sinatra's
      # own work per request adds the same to both routes).
      burning = ->(endpoint, s) { s.labels["endpoint"] == endpoint && in_function?(profile, s, "Object#burn") }
      users = total(profile, "cpu-time") { |s| burning.call("GET /users/:id", s) }
      orders = total(profile, "cpu-time") { |s| burning.call("POST /orders", s) }
      assert_operator users, :>, 0
      assert_within spent["POST /orders"] / spent["GET /users/:id"], orders.to_f / users, RATIO_TOLERANCE,
                    "POST /orders : GET /users/:id CPU"
      endpoints = profile.samples.filter_map { |s| s.labels["endpoint"] }.uniq
      assert_empty endpoints.grep(%r{/users/\\d}), "no raw path becomes a label: #{endpoints}"
    end
  end
end
