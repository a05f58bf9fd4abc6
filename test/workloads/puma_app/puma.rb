# frozen_string_literal: true

# Puma in cluster mode for test/puma_test.rb: WORKERS workers of THREADS
# threads, on the port the test chose.
workers Integer(ENV.fetch("PUMA_WORKERS", "2"))
threads Integer(ENV.fetch("PUMA_THREADS", "4")), Integer(ENV.fetch("PUMA_THREADS", "4"))
bind "tcp://127.0.0.1:#{ENV.fetch("PUMA_PORT")}"
environment "production"
quiet
# A worker caught in Puma's shutdown hang (puma/puma#3677, see
# test/puma_test.rb) is killed after this long instead of the default 30 s.
worker_shutdown_timeout 3
