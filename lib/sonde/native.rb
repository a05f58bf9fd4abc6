# frozen_string_literal: true

require_relative "platform"
require_relative "errors"

module Sonde
  # The module the native core defines its methods on.
  #
  # The core is not required like an ordinary extension: the loader
  # (ext/sonde_loader) opens it with RTLD_LOCAL | RTLD_DEEPBIND and checks
  # that it was built against this process's libruby before calling its init
  # (see sonde_loader.c for why). Requiring this file never raises; an
  # unsupported platform or a missing or mismatched build is recorded and
  # reported by load_error, and raised by load!.
  module Native
    # Guards the outcome, so that two threads calling load at once cannot
    # run the core's init twice.
    @load_lock = Mutex.new
    @outcome = nil # nil until the first load; then :loaded or :failed
    @load_error = nil

    class << self
      # Loads the core once; later calls return the first outcome.
      # true when the core's methods are defined on Sonde::Native, false
      # when not (load_error says why). Never raises Sonde::Error.
      def load
        @load_lock.synchronize do
          @outcome ||= attempt_load
          @outcome == :loaded
        end
      end

      # Like load, but raises the recorded Sonde::UnsupportedError (or its
      # subclass Sonde::LoadError) when the core could not be loaded.
      def load!
        load || raise(load_error)
        true
      end

      def loaded?
        @outcome == :loaded
      end

      # The Sonde::UnsupportedError or Sonde::LoadError that stopped the
      # last load, or nil (not attempted yet, or loaded).
      attr_reader :load_error

      # Opens the shared library at path with the loader and calls its init
      # with into. Returns nil; raises Sonde::LoadError (reason
      # :dlopen_failed, :wrong_ruby or :missing_init) when the library cannot
      # be used, and nothing of it stays loaded. Does not memoize: it is the
      # step load takes, exposed so tests can feed it any file.
      def load_library(path, into: self)
        require_loader
        reason, message = NativeLoader.load_library(path.to_s, into)
        raise Sonde::LoadError.new(message, reason: reason) if reason

        nil
      end

      # Forgets a failed outcome so the next load tries again (for tests,
      # which stub the platform checks). A loaded core cannot be unloaded,
      # so once loaded this does nothing and returns false.
      def forget_failed_load
        @load_lock.synchronize do
          return false if @outcome == :loaded

          @outcome = nil
          @load_error = nil
          true
        end
      end

      private

      def attempt_load
        reason = Platform.unsupported_reason
        raise UnsupportedError, reason if reason

        core = Platform.native_extension_path
        check_built(core)
        load_core(core)
        :loaded
      rescue UnsupportedError => e
        @load_error = e
        :failed
      end

      # An exception from the core's init is a bug in the core. It is kept
      # as the load error rather than raised, and the outcome is memoized
      # like any other, so init never runs a second time on a half-set-up
      # module.
      def load_core(core)
        # The core's init reads Sonde::Labels' and Sonde::TraceContext's constants.
        require_relative "labels"
        require_relative "trace_context"
        load_library(core)
      rescue Sonde::Error
        raise
      rescue StandardError => e
        raise Sonde::LoadError.new("Sonde's native core #{core} failed to initialize: #{e.class}: #{e.message}",
                                   reason: :init_failed)
      end

      # Requires the loader extension unless it is already there (tests may
      # have required a loader built elsewhere).
      def require_loader
        return if defined?(Sonde::NativeLoader)

        path = Platform.loader_extension_path
        check_built(path)
        begin
          require path
        rescue ::LoadError => e
          raise Sonde::LoadError.new("Sonde's loader extension #{path} could not be loaded: #{e.message}",
                                     reason: :dlopen_failed)
        end
      end

      def check_built(path)
        return if File.file?(path)

        raise Sonde::LoadError.new(
          "Sonde's native extension is not built for Ruby #{RUBY_VERSION} (#{RUBY_PLATFORM}): " \
          "#{path} is missing; run `rake compile` or reinstall the gem",
          reason: :dlopen_failed
        )
      end
    end
  end
end
