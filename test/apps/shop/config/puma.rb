# frozen_string_literal: true

# Cluster mode as production runs it. Puma 7 and later preload the app in
# the master by default: Rails boots once, then the workers fork.
workers Integer(ENV.fetch("WEB_CONCURRENCY", "2"))
threads_count = Integer(ENV.fetch("RAILS_MAX_THREADS", "3"))
threads threads_count, threads_count
bind "tcp://127.0.0.1:#{ENV.fetch("PORT")}"
environment ENV.fetch("RAILS_ENV", "production")
worker_shutdown_timeout 10
