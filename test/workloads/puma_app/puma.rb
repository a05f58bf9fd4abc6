# frozen_string_literal: true

# Puma in cluster mode for test/puma_test.rb: WORKERS workers of THREADS
# threads, on the port the test chose.
workers Integer(ENV.fetch("PUMA_WORKERS", "2"))
threads Integer(ENV.fetch("PUMA_THREADS", "4")), Integer(ENV.fetch("PUMA_THREADS", "4"))
bind "tcp://127.0.0.1:#{ENV.fetch("PUMA_PORT")}"
environment "production"
quiet
