# frozen_string_literal: true

# Always-on profiling, configured by the environment:
#
#   RUBYOPT=-rsonde/auto SONDE_EXPORT=pyroscope:http://pyroscope:4040 SONDE_SERVICE=web ruby app.rb
#
# Starts Sonde in continuous mode (a profile every SONDE_EVERY seconds to the
# SONDE_EXPORT targets). Never stops the application: if Sonde cannot run
# here, or the configuration is wrong, it says why on stderr and the
# application runs unprofiled.
require_relative "../sonde"

begin
  Sonde.start(continuous: true) unless Sonde.running?
rescue Sonde::Error => e
  warn "sonde/auto: not profiling process #{Process.pid}: #{e.message}"
end
