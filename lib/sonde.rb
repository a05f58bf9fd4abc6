# frozen_string_literal: true

require_relative "sonde/version"
require_relative "sonde/errors"
require_relative "sonde/native"
require_relative "sonde/process_hooks"
require_relative "sonde/trap_guard"
require_relative "sonde/ractor_guard"

# Sonde: a sampling CPU and wall-time profiler for every Ruby thread.
#
#   Sonde.profile(out: "work.pprof") { work }
#
#   Sonde.start(rate: 100)
#   work
#   profile = Sonde.stop
#   profile.write("work.pprof")
module Sonde
  # The integrations and the endpoint load when first named, so that
  # `require "sonde"` (what Bundler does) is all an app needs to write
  # `use Sonde::Middleware` or `mount Sonde::PprofApp.new(...)`.
  autoload :PprofApp, File.expand_path("sonde/pprof_app", __dir__)
  autoload :Middleware, File.expand_path("sonde/middleware", __dir__)
  autoload :SidekiqMiddleware, File.expand_path("sonde/sidekiq", __dir__)
  autoload :ActiveJobLabels, File.expand_path("sonde/active_job", __dir__)
  autoload :Sinatra, File.expand_path("sonde/sinatra", __dir__)
  # The pprof reader (Sonde::Pprof.decode(bytes)), for scripts that look
  # into a profile.
  autoload :Pprof, File.expand_path("sonde/pprof", __dir__)
  # What a run needs loads at its start (or when first named): every object
  # a library keeps alive stays on the application's heap, and a heap that
  # holds more grows sooner and collects less often. A program that only
  # loads Sonde keeps the GC it had (test/startup_test.rb).
  autoload :Options, File.expand_path("sonde/options", __dir__)
  autoload :Profile, File.expand_path("sonde/profile", __dir__)
  autoload :Session, File.expand_path("sonde/session", __dir__)
  autoload :SamplingError, File.expand_path("sonde/session", __dir__)
  autoload :Labels, File.expand_path("sonde/labels", __dir__)
  autoload :TraceContext, File.expand_path("sonde/trace_context", __dir__)

  @session = nil
  @session_lock = Mutex.new

  ProcessHooks.install
  TrapGuard.install
  RactorGuard.install

  class << self
    # This process's Sonde::Session: the run, its exporters and its fork and
    # exec handling, made at first use. The methods below are its public
    # face; the session itself is for Sonde's own hooks.
    def session
      @session || @session_lock.synchronize { @session ||= Session.new }
    end

    # The session, or nil while nothing has used Sonde yet (the fork and
    # exec hooks: a process that never started Sonde has nothing to do).
    def existing_session
      @session
    end

    # Whether this Ruby and platform can be profiled (and the native core loaded).
    def supported?
      Native.load
    end

    # Why not, when supported? is false; nil otherwise.
    def unsupported_reason
      Native.load ? nil : Native.load_error.message
    end

    # Starts sampling every Ruby thread of this process:
    #   Sonde.start(rate: 100, alloc: true)
    # Sonde::Options::SETTINGS defines every option (its default, its
    # SONDE_* variable, what it accepts); docs/ruby-api.md's "Options" table
    # documents them (test/options_doc_test.rb holds the two together). A
    # keyword wins over the variable. Raises Sonde::ArgumentError for a bad
    # option, Sonde::UnsupportedError where Sonde cannot run,
    # Sonde::StateError when already started, Sonde::SignalConflictError
    # when another library owns SIGPROF.
    def start(**keywords)
      session.start(**keywords)
    end

    # The effective settings: for each, its value and where it came from
    # ("keyword", "default" or the SONDE_* variable). Those of the current
    # run, or else what Sonde.start with no keywords would use now.
    def configuration
      session.configuration
    end

    # Stops sampling and returns the Sonde::Profile of the run. Raises
    # Sonde::StateError when not started, Sonde::SamplingError when sampling
    # failed during the run (the error carries the partial profile).
    def stop
      session.stop
    end

    # Returns the Sonde::Profile of the time since the previous flush (or
    # the start) while sampling goes on: no sample is lost or counted twice
    # between two flushes. Raises Sonde::StateError when not running.
    def flush
      session.flush
    end

    # The options of the current (or last) run, as Sonde.start took them.
    def options
      session.options&.to_h
    end

    # Sonde's own Ruby threads while it runs (the idle helper, and in
    # continuous mode the flusher and the exporters' threads). Thread.list
    # leaves them out, so that code which kills or joins every other thread
    # neither hangs on them nor stops Sonde. Empty when not running.
    def threads
      Native.loaded? ? Native.own_threads : []
    end

    # True while sampling. False when stopped, and after a sampling failure
    # (Sonde.stop then returns the error).
    def running?
      Native.loaded? && Native.running?
    end

    # Counters of the current run (or of the last one, once stopped). Each
    # key is in docs/stats.md (test/stats_doc_test.rb holds the two
    # together). Empty before any run.
    def stats
      session.stats
    end

    # Profiles the block and returns its Sonde::Profile; with out:, also
    # writes it there (checked before the block runs). The profile is
    # written even when the block raises; the exception then goes on.
    # While continuous mode runs (RUBYOPT=-rsonde/auto, always-on), the
    # block's period is cut out of that run, which goes on, with its
    # settings (an option that differs is a Sonde::StateError).
    def profile(out: nil, **options)
      raise Sonde::ArgumentError, "Sonde.profile needs a block" unless block_given?

      Profile.check_writable!(out) if out
      within = session.profile_within_continuous(out, options) { yield }
      return within if within

      start(**options)
      begin
        yield
      ensure
        profile = stop
        profile.write(out) if out
      end
      profile
    end

    # Runs the block with these labels added to the current fiber's (inner
    # ones win; the previous labels come back when the block ends, however
    # it ends). Every sample taken meanwhile, CPU and wall, carries them as
    # pprof string labels:
    #   Sonde.with_labels(tenant: "acme", job: "import") { work }
    # Names and values: Strings or Symbols of valid UTF-8 without control
    # characters, names up to 64 bytes, values up to 256, at most 16 labels
    # at once; Sonde's own label names ("thread id", "state", ...) are
    # refused. Cheap and harmless while Sonde is not running.
    def with_labels(**labels, &block)
      raise Sonde::ArgumentError, "Sonde.with_labels needs a block" unless block

      Labels.with(labels, &block)
    end

    # The current fiber's labels (a frozen Hash of String => String).
    def labels
      Labels.current
    end

    # Runs the block in a tracing span: every sample taken meanwhile carries
    # its ids as the labels trace_id, span_id and local_root_span_id (hex),
    # which the Datadog exporter gives Datadog as "span id" and "local root
    # span id". Ids: Integers or hex Strings; span ids of 64 bits, non-zero;
    # trace_id of up to 128 bits, optional; local_root_span_id defaults to
    # span_id. Sonde's Rack, Rails, ActiveJob and Sidekiq integrations do
    # this by themselves when OpenTelemetry or Datadog tracing is loaded.
    #   Sonde.with_trace_context(trace_id: "4bf92f3577b34da6a3ce929d0e0e4736", span_id: "00f067aa0ba902b7") { work }
    def with_trace_context(span_id:, trace_id: nil, local_root_span_id: nil, &block)
      raise Sonde::ArgumentError, "Sonde.with_trace_context needs a block" unless block

      TraceContext.with(span_id: span_id, trace_id: trace_id, local_root_span_id: local_root_span_id, &block)
    end

    # The current fiber's trace context ({trace_id:, span_id:,
    # local_root_span_id:}, hex Strings), or nil.
    def trace_context
      TraceContext.current
    end

    # Calls the block with the Sonde::Profile recorded so far just before this
    # process execs (sonde record writes it). Internal to Sonde.
    def on_exec(&block)
      session.on_exec(&block)
    end
  end
end

# Rails: Sonde's Railtie, when Rails is loaded (Bundler requires gems after
# `require "rails"`), or as soon as the application's class opens when Rails
# loads after Sonde (RUBYOPT=-rsonde/auto).
if defined?(::Rails::Railtie)
  require_relative "sonde/railtie"
else
  require_relative "sonde/railtie_loader"
  Sonde::RailtieLoader.install
end
