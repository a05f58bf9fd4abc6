# frozen_string_literal: true

# docs/rails-and-rack.md, "Sidekiq": each job runs under its class and queue.
require "sonde/sidekiq"

Sidekiq.configure_server do |config|
  config.server_middleware { |chain| chain.add Sonde::SidekiqMiddleware }
end
