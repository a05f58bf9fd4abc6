# frozen_string_literal: true

require_relative "boot"

require "rails"
require "action_controller/railtie"
require "active_job/railtie"
# What Bundler.require does with the Gemfile's `gem "sidekiq"` and `gem "sonde"`.
require "sidekiq"
require "sonde"

module Shop
  class Application < Rails::Application
    config.load_defaults Rails::VERSION::STRING.to_f
    config.eager_load = true
    config.api_only = false
    # The job classes are Sidekiq::Job classes; ActiveJob stays for the
    # Railtie's job labels.
    config.active_job.queue_adapter = :sidekiq
    config.secret_key_base = ENV.fetch("SECRET_KEY_BASE", "shop-real-stack-test")
    config.logger = ActiveSupport::Logger.new($stdout)
    config.log_level = :warn
  end
end
