# frozen_string_literal: true

Rails.application.configure do
  config.enable_reloading = false if config.respond_to?(:enable_reloading=)
  config.cache_classes = true unless config.respond_to?(:enable_reloading=)
  config.consider_all_requests_local = false
  config.public_file_server.enabled = false
  # The tests reach the app on 127.0.0.1 with a port of the kernel's choosing.
  config.hosts.clear
end
