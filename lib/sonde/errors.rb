# frozen_string_literal: true

module Sonde
  # Base class of every error Sonde raises.
  class Error < StandardError; end

  # This Ruby or platform cannot be profiled; the message says why.
  class UnsupportedError < Error; end

  # The native extension exists but could not be loaded (missing file, built
  # for another Ruby, missing entry point). A kind of UnsupportedError, so code
  # that checks Sonde.supported? needs no second rescue.
  class LoadError < UnsupportedError
    # :dlopen_failed, :wrong_ruby or :missing_init
    attr_reader :reason

    def initialize(message, reason: nil)
      super(message)
      @reason = reason
    end
  end

  # An option, file or environment variable was not acceptable.
  class ArgumentError < Error; end

  # Another library (another profiler) owns SIGPROF, so Sonde will not start
  # with signals; the message names the handler's library.
  class SignalConflictError < Error; end

  # Start while running, stop while stopped, and the like.
  class StateError < Error; end
end
