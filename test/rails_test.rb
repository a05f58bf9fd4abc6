# frozen_string_literal: true

require_relative "support/test_helper"

# Sonde's Railtie in a real Rails application (Debian's Rails 6.1, booted by
# test/workloads/rails_app.rb): config.sonde starts Sonde, the middleware is
# first in the stack, each action runs under its Controller#action and each
# job under its class and queue, in the proportions the workload measured
# on its own thread CPU clock.
class RailsTest < Minitest::Test
  include SondeTestHelper

  # The endpoints' and jobs' CPU against what the workload measured.
  RATIO_TOLERANCE = 0.25

  def setup
    skip_unless_loadable(%w[rails action_controller/railtie active_job/railtie],
                         "Rails (railties, actionpack, activejob) is not installed for this Ruby " \
                         "(script/setup installs Debian's)")
  end

  # Statistical. Its bounds against what 3 runs measured (3.1, 2 shared busy cores, 4 Dec 2026,
  # SONDE_SPREAD_LOG + script/spread): "OrdersController#create" -12.4% to +7.2% of ±25%;
  # "ImportJob" -6.1% to +18.8% of ±25%; "each request its own span" 4.00-4.00x its bound (>=).
  statistical def test_a_rails_app_is_labelled_by_controller_action_and_job
    Dir.mktmpdir do |dir|
      out = File.join(dir, "rails.pprof")
      facts = run_workload("rails_app", out, gems: true)
      assert facts["started_by_railtie"], "config.sonde.start = true started Sonde"
      assert_equal %w[shop development], facts.values_at("service", "env"), "the app's name and Rails.env"
      assert_equal "Sonde::Middleware", facts["middleware"].first, "the middleware is first in the stack"

      profile = Sonde::Pprof.read(out)
      # The truth the app measured is its burn (Object#burn); the labels
      # also cover Rails' own work around each action, the same few ms per
      # request for both endpoints (more on a loaded machine), so the
      # ratio is taken over the samples in Object#burn.
      cpu = lambda do |name, value|
        total(profile, "cpu-time") { |s| s.labels[name] == value && in_function?(profile, s, "Object#burn") }
      end
      spent = facts["spent"]
      users = cpu.call("endpoint", "UsersController#show")
      orders = cpu.call("endpoint", "OrdersController#create")
      assert_operator users, :>, 0
      assert_within spent["OrdersController#create"] / spent["UsersController#show"], orders.to_f / users,
                    RATIO_TOLERANCE, "OrdersController#create : UsersController#show CPU"
      import = cpu.call("job", "ImportJob")
      mail = cpu.call("job", "MailJob")
      assert_operator mail, :>, 0
      assert_within spent["ImportJob"] / spent["MailJob"], import.to_f / mail, RATIO_TOLERANCE, "ImportJob : MailJob CPU"
      queues = profile.samples.filter_map { |s| [s.labels["job"], s.labels["queue"]] if s.labels["job"] }.uniq.sort
      assert_equal [%w[ImportJob bulk], %w[MailJob default]], queues
      endpoints = profile.samples.filter_map { |s| s.labels["endpoint"] }.uniq
      assert_empty endpoints.grep(%r{/users/\d}), "no raw path becomes a label: #{endpoints}"
      # One endpoint per request, from the middleware on (the router's
      # pick), and jobs are endpoints too (Datadog's endpoint view).
      assert_equal ["ImportJob", "MailJob", "OrdersController#create", "UsersController#show"], endpoints.sort
      # Sonde's own frames on an action's stack: the middleware's call and
      # the controller's process_action, no blocks around them (there were 8).
      in_burn = profile.samples.select { |s| s.labels["endpoint"]&.include?("#") && in_function?(profile, s, "Object#burn") }
      own = in_burn.map { |s| profile.frames(s).map { |f, _| f.name if f.filename.start_with?(LIB) }.compact }.uniq
      assert_equal [["Sonde::Rails::ControllerLabels#process_action", "Sonde::Middleware#call"]], own
      # The tracer's middleware ran after Sonde's: the controllers' samples
      # carry its request spans all the same (80 requests, ids 0x5001..).
      in_actions = profile.samples.select { |s| s.labels["endpoint"]&.include?("#") && in_function?(profile, s, "Object#burn") }
      spans = in_actions.map { |s| s.labels.values_at("span_id", "local_root_span_id", "trace_id") }
      assert_empty spans.reject { |span, root, trace| span && span == root && trace == format("%032x", 0xabc) },
                   "every sample in an action carries its request's span"
      ids = spans.map { |span, _, _| span.to_i(16) }.uniq
      assert_empty ids.reject { |id| (0x5001..0x5050).cover?(id) }
      assert_operator ids.size, :>=, 20, "each request its own span"
      assert_go_pprof_tagfocus(out)
    end
  end

  # Boots a bare Rails app with one config.sonde line; [stderr, status].
  # sonde_first: Sonde loads before Rails, as RUBYOPT=-rsonde/auto does.
  def boot_with(config_line, sonde_first: false, after_boot: "")
    out, err, status = run_ruby(*(sonde_first ? ["-rsonde"] : []), "-e", <<~RUBY, gems: true)
      require "logger"
      require "rails"
      require "action_controller/railtie"
      require "sonde"
      class Booted < Rails::Application
        config.eager_load = false
        config.logger = Logger.new(nil)
        config.secret_key_base = "x"
        #{config_line}
      end
      Rails.application.initialize!
      #{after_boot}
    RUBY
    @boot_stdout = out
    [err, status]
  end

  # RUBYOPT=-rsonde/auto loads Sonde before Rails: Bundler's require "sonde"
  # is then a no-op, and the Railtie must still load (it did not: no
  # labels, no config.sonde).
  def test_the_railtie_loads_when_rails_comes_after_sonde
    err, status = boot_with("config.sonde.controller_labels = true", sonde_first: true,
                                                                     after_boot: <<~RUBY)
                                                                       puts Rails.application.middleware.first.inspect
                                                                       puts Sonde::RailtieLoader.installed?
                                                                     RUBY
    assert status.success?, err
    assert_equal %w[Sonde::Middleware false], @boot_stdout.split, "the middleware is first; the TracePoint is off"
  end

  # The name the middleware gives a request before routing: the router's
  # pick, kept by the path's shape (ids out), nil where no controller
  # serves it (then the middleware's "GET /x" stays).
  def test_the_route_endpoint_names_requests_as_the_router_will
    err, status = boot_with(<<~RUBY, after_boot: <<~'CHECK')
      routes.append do
        resources :users
        namespace(:admin) { resources :users }
        mount(->(_env) { [200, {}, ["ok"]] } => "/rack")
      end
    RUBY
      endpoint = Sonde::Rails::RouteEndpoint.new(Rails.application)
      name = ->(path, verb = "GET") { endpoint.call(Rack::MockRequest.env_for(path, method: verb)).inspect }
      puts [name["/users/42"], name["/users/7"], name["/users/new"], name["/users/3", "DELETE"],
            name["/admin/users/9/edit"], name["/users/5f3c9a2b-7e1d-4c6a-8b9e-0f1234567890"], name["/rack/x"],
            name["/nowhere"]].join(" ")
    CHECK
    assert status.success?, err
    assert_equal '"UsersController#show" "UsersController#show" "UsersController#new" "UsersController#destroy" ' \
                 '"Admin::UsersController#edit" "UsersController#show" nil nil', @boot_stdout.strip
  end

  def test_require_sonde_reaches_every_integration
    out, err, status = run_ruby("-rsonde", "-e", <<~RUBY, gems: true)
      puts [Sonde::PprofApp, Sonde::Middleware, Sonde::SidekiqMiddleware, Sonde::Sinatra, Sonde::Pprof].map(&:name).join(",")
    RUBY
    assert status.success?, err
    assert_equal "Sonde::PprofApp,Sonde::Middleware,Sonde::SidekiqMiddleware,Sonde::Sinatra,Sonde::Pprof", out.strip
  end

  def test_a_mistyped_setting_is_refused_at_boot
    err, status = boot_with("config.sonde.rat = 250")
    refute status.success?
    assert_match(/config\.sonde\.rat is not a setting \(accepted: start, middleware, controller_labels, active_job, rate, /,
                 err)
  end

  def test_an_integration_switch_that_is_not_a_boolean_is_refused_at_boot
    err, status = boot_with('config.sonde.middleware = "false"')
    refute status.success?
    assert_match(/config\.sonde\.middleware must be true or false, got "false"/, err)
  end

  def test_nothing_of_rails_loads_without_rails
    # With RubyGems, so that Rails could load: it must not.
    out, err, status = run_ruby("-rsonde", "-rsonde/middleware", "-e",
                                'puts [defined?(Sonde::Railtie).inspect, ' \
                                '$LOADED_FEATURES.grep(/railtie|rails\\//).grep_v(/sonde\\/railtie_loader/).size].join(",")',
                                gems: true)
    assert status.success?, err
    assert_equal "nil,0", out.strip
  end

  private

  def assert_go_pprof_tagfocus(path)
    return unless go_available?

    top, err, status = Open3.capture3("go", "tool", "pprof", "-top", "-tagfocus=endpoint=OrdersController#create", path)
    assert status.success?, err
    assert_includes top, "Object#burn"
  end
end
