# frozen_string_literal: true

require_relative "../sonde"
require_relative "middleware"
require_relative "rails/controller_labels"
require_relative "rails/route_endpoint"

module Sonde
  # Rails integration, loaded by `require "sonde"` when Rails is (Bundler
  # requires gems after `require "rails"`); nothing of it loads otherwise.
  #
  #   # config/application.rb (or an environment file)
  #   config.sonde.start = true                      # profile from boot (default: false)
  #   config.sonde.continuous = true                 # any Sonde.start option, by its name
  #   config.sonde.export = "pyroscope:http://pyroscope:4040"
  #   config.sonde.middleware = false                # default true: Sonde::Middleware first in the stack
  #   config.sonde.controller_labels = false         # default true: endpoint "UsersController#show"
  #   config.sonde.active_job = false                # default true: job and queue labels on jobs
  #
  # Labels need no start: with `start` false (the default) the middleware,
  # the controllers and the jobs still set them, and a Sonde started later
  # (`-rsonde/auto`, Sonde.start in an initializer, the pprof endpoint)
  # records them. With `start` true Sonde starts once the application is
  # initialized, with config.sonde's Sonde.start options (the SONDE_*
  # environment fills in the rest, as always), and with the application's
  # name as the service and Rails.env as the env unless either is set.
  # A key of config.sonde that is neither is refused at boot, naming it and
  # what is accepted. A failure to start is a warning: the application
  # boots unprofiled.
  class Railtie < ::Rails::Railtie
    # config.sonde's own keys, with their defaults.
    INTEGRATION_DEFAULTS = { start: false, middleware: true, controller_labels: true, active_job: true }.freeze

    config.sonde = ActiveSupport::OrderedOptions.new
    INTEGRATION_DEFAULTS.each { |key, value| config.sonde[key] = value }

    initializer "sonde.check_configuration", before: :build_middleware_stack do |app|
      Railtie.start_options(app.config.sonde)
    end

    # With controller labels, the middleware names the request by the
    # action the router will pick, so the whole request has one endpoint.
    initializer "sonde.middleware", before: :build_middleware_stack do |app|
      next unless app.config.sonde.middleware

      if app.config.sonde.controller_labels
        app.config.middleware.insert(0, Sonde::Middleware, endpoint: Sonde::Rails::RouteEndpoint.new(app))
      else
        app.config.middleware.insert(0, Sonde::Middleware)
      end
    end

    initializer "sonde.controller_labels" do |app|
      next unless app.config.sonde.controller_labels

      # Runs for ActionController::Base and ::API alike.
      ActiveSupport.on_load(:action_controller) { prepend Sonde::Rails::ControllerLabels }
    end

    initializer "sonde.active_job" do |app|
      require_relative "active_job" if app.config.sonde.active_job
    end

    config.after_initialize do |app|
      Railtie.start(app) if app.config.sonde.start
    end

    class << self
      # config.sonde's Sonde.start options; Sonde::ArgumentError for a key
      # that is neither one of those nor one of the integration's, or for
      # an integration key that is not true or false (a "false" String
      # from an environment variable would otherwise read as true).
      def start_options(sonde_config)
        options = sonde_config.to_h.transform_keys(&:to_sym)
        accepted = Options::SETTINGS.map(&:name)
        unknown = options.keys - INTEGRATION_DEFAULTS.keys - accepted
        unless unknown.empty?
          raise Sonde::ArgumentError,
                "config.sonde.#{unknown.first} is not a setting (accepted: " \
                "#{(INTEGRATION_DEFAULTS.keys + accepted).join(", ")})"
        end
        INTEGRATION_DEFAULTS.each_key do |key|
          next if [true, false].include?(options.fetch(key, true))

          raise Sonde::ArgumentError, "config.sonde.#{key} must be true or false, got #{Setting.shown(options[key])}"
        end
        options.slice(*accepted)
      end

      def start(app)
        return if Sonde.running? # -rsonde/auto or an initializer was first

        options = start_options(app.config.sonde)
        options[:service] ||= app_name(app) unless ENV["SONDE_SERVICE"]
        options[:env] ||= ::Rails.env.to_s unless ENV["SONDE_ENV"]
        Sonde.start(**options)
      rescue Sonde::Error => e
        warn "sonde: Rails app not profiled (process #{Process.pid}): #{e.message}"
      end

      # "Shop::Application" -> "shop"
      def app_name(app)
        name = app.class.name.to_s.split("::").first.to_s
        name.gsub(/([a-z\d])([A-Z])/, '\1_\2').downcase.then { |text| text.empty? ? nil : text }
      end
    end
  end
end
