# frozen_string_literal: true

require_relative "sonde/version"
require_relative "sonde/errors"
require_relative "sonde/platform"
require_relative "sonde/native"
require_relative "sonde/options"
require_relative "sonde/profile"
require_relative "sonde/process_hooks"
require_relative "sonde/continuous"
require_relative "sonde/trap_guard"

# Sonde: a sampling CPU and wall-time profiler for every Ruby thread.
#
#   Sonde.profile(out: "work.pprof") { work }
#
#   Sonde.start(rate: 100)
#   work
#   profile = Sonde.stop
#   profile.write("work.pprof")
module Sonde
  # Raised by Sonde.stop when sampling failed during the run. The
  # application was never interrupted; #profile holds what was recorded
  # before the failure, and #cause the exception sampling raised.
  class SamplingError < Error
    attr_reader :profile

    def initialize(message, profile)
      super(message)
      @profile = profile
    end
  end

  @lifecycle_lock = Mutex.new
  @stopping = false
  @last_stats = {}
  @options = nil
  @continuous = nil
  @exec_listeners = []

  ProcessHooks.install
  TrapGuard.install

  class << self
    # Whether this Ruby and platform can be profiled (and the native core loaded).
    def supported?
      Native.load
    end

    # Why not, when supported? is false; nil otherwise.
    def unsupported_reason
      Native.load ? nil : Native.load_error.message
    end

    # Starts sampling every Ruby thread of this process. Every option can
    # also come from a SONDE_* environment variable (a keyword wins):
    #   rate:       samples per second (1..5000, default 100)       SONDE_RATE
    #   max_frames: deepest stack kept (1..10000, default 400);     SONDE_MAX_FRAMES
    #               deeper stacks keep their innermost frames and a "(truncated N frames)" frame
    #   signals:    true (default) interrupts the running thread    SONDE_NO_SIGNALS=1 for false
    #               with SIGPROF; false never sends a signal (README, "No-signals mode")
    #   overhead_target: percent of wall time sampling may take,    SONDE_OVERHEAD_TARGET
    #               (0, 20], default 1.0; sampling slows down to stay under it
    #   gc:         true (default) records GC time                  SONDE_GC
    #   continuous: true flushes every `every` seconds to the exporters (default false)
    #   every:      seconds between flushes (1..3600, default 60)   SONDE_EVERY
    #   export:     "dir:PATH", "pyroscope:URL", "datadog:URL", comma-separated
    #               (default "dir:sonde-profiles")                  SONDE_EXPORT
    #   service:, env:, version: profile tags                       SONDE_SERVICE, SONDE_ENV, SONDE_VERSION
    #   tags:       more tags, {"team" => "web"}                    SONDE_TAGS="team:web,region:eu"
    # Raises Sonde::ArgumentError for a bad option, Sonde::UnsupportedError
    # where Sonde cannot run, Sonde::StateError when already started,
    # Sonde::SignalConflictError when another library owns SIGPROF.
    def start(**keywords)
      options = Options.new(**keywords)
      exporters = options.continuous ? exporters_for(options) : nil
      Native.load!
      install_exit_hook if exporters # before the start: a child forked meanwhile inherits it
      @lifecycle_lock.synchronize do
        raise StateError, already_started_message if Native.active?

        start_locked(options, exporters)
      end
      true
    end

    # The effective settings: for each, its value and where it came from
    # ("keyword", "default" or the SONDE_* variable). Those of the current
    # run, or else what Sonde.start with no keywords would use now.
    def configuration
      options = @options || Options.new
      options.to_h.to_h { |name, value| [name, { value: value, source: options.sources[name] }] }
    end

    # Stops sampling and returns the Sonde::Profile of the run. Raises
    # Sonde::StateError when not started, Sonde::SamplingError when sampling
    # failed during the run (the error carries the partial profile).
    def stop
      raise StateError, "Sonde is not running; call Sonde.start first" unless Native.loaded? && Native.active?

      continuous = @continuous
      result = begin
        @stopping = true # a child forked from here on stays stopped (restart_in_forked_child)
        continuous&.stop_thread
        @lifecycle_lock.synchronize do
          raise StateError, "Sonde is not running; call Sonde.start first" unless Native.active?

          @continuous = nil
          Native.stop(true)
        end
      ensure
        @stopping = false
      end
      @last_stats = result[:stats].freeze
      profile = profile_from(result)
      if continuous
        continuous.finish(profile)
        # The exporters' final counts, once the last period went out.
        @last_stats = @last_stats.merge(exporters: continuous.exporter_stats).freeze
      end
      failure = result[:failure]
      if failure
        raise SamplingError.new("sampling failed and stopped early (the application was not interrupted): " \
                                "#{failure.class}: #{failure.message}", profile), cause: failure
      end
      profile
    end

    # Returns the Sonde::Profile of the time since the previous flush (or
    # the start) while sampling goes on: no sample is lost or counted twice
    # between two flushes. Raises Sonde::StateError when not running.
    def flush
      result = @lifecycle_lock.synchronize do
        raise StateError, "Sonde is not running; call Sonde.start first" unless Native.loaded? && Native.active?

        Native.flush
      end
      profile_from(result)
    end

    # The options of the current (or last) run, as Sonde.start took them.
    def options
      @options&.to_h
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

    # Counters of the current run (or of the last one, once stopped), as the
    # README's "Stats" table lists them: passes and samples (samples,
    # cpu_samples, thread_samples, stacks_reused, ...), the CPU timers
    # (cpu_timers, cpu_sample_rate_hz, captures_dropped, ...), signals
    # (signals_sent, signals_received, tick_signals, cpu_signals, ...),
    # pacing, GC, flushes and the run's settings. Empty before any run.
    def stats
      stats = (Native.loaded? && Native.stats) || @last_stats
      continuous = @continuous
      # In continuous mode: what each exporter delivered, dropped or failed.
      stats && continuous ? stats.merge(exporters: continuous.exporter_stats) : stats
    end

    # Profiles the block and returns its Sonde::Profile; with out:, also
    # writes it there (checked before the block runs). The profile is
    # written even when the block raises; the exception then goes on.
    def profile(out: nil, **options)
      raise Sonde::ArgumentError, "Sonde.profile needs a block" unless block_given?

      Profile.check_writable!(out) if out
      start(**options)
      begin
        yield
      ensure
        profile = stop
        profile.write(out) if out
      end
      profile
    end

    # Calls the block with the Sonde::Profile recorded so far just before this
    # process execs (sonde record writes it). Internal to Sonde.
    def on_exec(&block)
      @exec_listeners << block
    end

    private

    # Native.start lets other threads run while it waits for Sonde's threads;
    # one of them may fork, and the child restarts sampling from @options and
    # @continuous (restart_in_forked_child). So both are set before it, and
    # put back if it fails.
    def start_locked(options, exporters)
      previous_options = @options
      @options = options
      @continuous = exporters && Continuous.new(options, exporters)
      begin
        Native.start(*options.native_arguments)
      rescue Exception # rubocop:disable Lint/RescueException -- undo, whatever stopped the start, then re-raise
        @options = previous_options
        @continuous = nil
        raise
      end
      @continuous&.start
    end

    def exporters_for(options)
      require_relative "sonde/exporters"
      # Errors name the setting as the user gave it: the keyword or the variable.
      option_name = options.sources.fetch(:export, "export").to_s
      option_name = "export" unless option_name.start_with?("SONDE_")
      Exporters.parse(options.export, option_name: option_name, service: options.service)
    end

    # Continuous mode exports the last period when the process exits.
    def install_exit_hook
      return if @exit_hook_installed

      @exit_hook_installed = true
      at_exit do
        stop if @continuous && Native.active?
      rescue StandardError => e
        warn "sonde: at exit: #{e.class}: #{e.message}"
      end
    end

    def profile_from(result)
      Profile.new(pprof: result[:pprof], start_time: Time.at(0, result[:start_epoch_ns], :nanosecond),
                  duration: result[:duration_ns] / 1e9, stats: result[:stats].freeze)
    end

    def restart_in_forked_child
      return unless Native.loaded? && Native.active?

      @lifecycle_lock = Mutex.new # another thread may have held it at fork
      Native.stop(false)
      if @stopping # forked while another thread was stopping Sonde: the child stays stopped
        @continuous = nil
        @stopping = false
        return
      end

      Native.start(*@options.native_arguments)
      @continuous&.restart_in_child
    rescue StandardError => e
      warn "sonde: could not restart profiling in forked child #{Process.pid}: #{e.class}: #{e.message}"
    end

    # Returns the options to resume with, or nil when nothing was running.
    def pause_before_exec
      return nil unless Native.loaded? && Native.active?

      options = @options
      begin
        profile = stop
      rescue SamplingError => e
        profile = e.profile
      end
      @exec_listeners.each { |listener| listener.call(profile) }
      options
    rescue StandardError => e
      warn "sonde: while stopping before exec: #{e.class}: #{e.message}"
      options
    end

    def resume_after_failed_exec(options)
      start(**options.to_h) if options && !Native.active?
    rescue StandardError => e
      warn "sonde: could not resume profiling after a failed exec: #{e.class}: #{e.message}"
    end

    def already_started_message
      if Native.running?
        "Sonde is already running; call Sonde.stop before starting again"
      else
        "Sonde stopped after a sampling failure; call Sonde.stop to collect the profile and the error " \
          "before starting again"
      end
    end
  end
end
