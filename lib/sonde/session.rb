# frozen_string_literal: true

require_relative "errors"
require_relative "native"
require_relative "options"
require_relative "profile"
require_relative "labels"

module Sonde
  # Continuous mode (and socket with it) and a live capture's wait load
  # when a run first uses them.
  autoload :Continuous, File.expand_path("continuous", __dir__)
  autoload :CaptureWait, File.expand_path("capture_wait", __dir__)

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

  # The profiling of this process: the current run's options, its
  # continuous-mode flusher and exporters, the stats of the last run, and
  # what fork and exec must do to it. One per process (Sonde.session); the
  # Sonde module's methods are its public face, and ProcessHooks talks to it
  # through #restart_in_forked_child, #pause_before_exec and
  # #resume_after_failed_exec.
  #
  # Threads: start, stop and flush run on application threads and take
  # @lock; the flusher thread calls #flush. The fork hook runs in the child,
  # where only the forking thread survived.
  class Session
    STOPPED = "Sonde is not running; call Sonde.start first"

    def initialize
      @lock = Mutex.new
      @stopping = false
      @last_stats = {}
      @options = nil
      @continuous = nil
      @exec_listeners = []
      @daemon_listeners = []
      @exit_hook_installed = false
    end

    # The options of the current (or last) run, or nil before any.
    attr_reader :options

    # The current run's continuous mode (its flusher's counts), or nil.
    attr_reader :continuous

    def start(**keywords)
      start_muting(nil, **keywords)
    end

    # start, with thread's wall samples left out from the first pass on
    # (a live capture's request thread: Sonde::CaptureWait).
    def start_muting(thread, **keywords)
      options = Options.new(**keywords)
      exporters = options.continuous ? build_exporters(options) : nil
      Native.load!
      install_exit_hook if exporters # before the start: a child forked meanwhile inherits it
      @lock.synchronize do
        raise StateError, already_started_message if Native.active?

        start_locked(options, exporters, thread)
      end
      true
    end

    def stop
      raise StateError, STOPPED unless active?

      continuous = @continuous
      tags = continuous&.tags
      result = begin
        @stopping = true # a child forked from here on stays stopped (restart_in_forked_child)
        continuous&.stop_thread
        @lock.synchronize do
          raise StateError, STOPPED unless Native.active?

          @continuous = nil
          Native.stop(true, tags && Continuous.comments(tags), Labels.table)
        end
      ensure
        @stopping = false
      end
      @last_stats = result[:stats].freeze
      profile = profile_from(result)
      if continuous
        continuous.finish(profile, tags)
        # The exporters' final counts, once the last period went out.
        @last_stats = @last_stats.merge(exporters: continuous.exporter_stats).freeze
      end
      raise_sampling_failure(result[:failure], profile) if result[:failure]
      profile
    end

    # The profile since the previous flush (or the start); comments go into
    # it (continuous mode's tags).
    def flush(comments: nil)
      result = @lock.synchronize do
        raise StateError, STOPPED unless active?

        Native.flush(comments, Labels.table)
      end
      profile_from(result)
    end

    # {name => {value:, source:}} of the current run, or else of what a
    # start with no keywords would use now.
    def configuration
      options = @options || Options.new
      options.to_h.to_h { |name, value| [name, { value: value, source: options.sources[name] }] }
    end

    def stats
      stats = (Native.loaded? && Native.stats) || @last_stats
      continuous = @continuous
      # In continuous mode: what each exporter delivered, dropped or failed,
      # and how often a killed flusher was replaced.
      return stats unless stats && continuous

      stats.merge(exporters: continuous.exporter_stats, flusher_restarts: continuous.flusher_restarts)
    end

    # The Sonde::Profile of the next seconds, for a live capture
    # (Sonde::PprofApp). Not running: starts Sonde at rate for the seconds
    # (sampling allocations with alloc: true, following the heap with
    # heap: true) and stops it. In continuous mode: a period of the run, cut
    # at both ends, with no periodic flush inside it (Continuous#capture;
    # the exporters get every part as usual); StateError if
    # the run does not sample what alloc:/heap: ask for. A run the
    # application started without continuous mode is its own: StateError.
    # The calling thread's wait is left out of the profile, and ends early
    # when cancelled (a callable) says true (Sonde::CaptureWait).
    def capture(seconds, rate:, alloc: false, heap: false, cancelled: nil)
      continuous = @continuous
      if continuous && active?
        check_capture_needs(alloc: alloc, heap: heap)
        return continuous.capture(seconds, cancelled: cancelled)
      end
      if active?
        raise StateError, "Sonde is running, started by the application without continuous mode: its profile is its own"
      end

      start_muting(Thread.current, rate: rate, **{ alloc: alloc, heap: heap }.select { |_, wanted| wanted })
      profile = nil
      CaptureWait.muted do
        CaptureWait.wait(seconds, cancelled)
      ensure
        profile = stop
      end
      profile
    end

    # Sonde.profile while continuous mode runs (an always-on process, a
    # console under RUBYOPT=-rsonde/auto): the block's period is cut out
    # of the run, which goes on, and exported like any other; nil when no
    # continuous run is active (Sonde.profile then starts and stops one of
    # its own). The run's settings apply: an option that differs from the
    # run's is refused, naming it.
    def profile_within_continuous(out, options)
      continuous = @continuous
      return nil unless continuous && active?

      current = @options.to_h
      differing = options.reject { |name, value| current.key?(name) && current[name] == value }
      unless differing.empty?
        run = differing.keys.map { |name| "#{name}: #{current.key?(name) ? current[name].inspect : "(no such option)"}" }
        given = differing.map { |name, value| "#{name}: #{value.inspect}" }
        raise StateError, "Sonde runs in continuous mode here; Sonde.profile takes the block's period out of that " \
                          "run, with the run's settings: #{run.join(", ")} (given #{given.join(", ")})"
      end
      continuous.period_around(out && ->(profile) { profile.write(out) }) { yield }
    end

    def on_exec(&block)
      @exec_listeners << block
    end

    # block(:before) in the process about to call Process.daemon,
    # block(:after, parent_pid) in the daemon, block(:failed) when
    # Process.daemon raised. Internal to Sonde (`sonde record`'s notes).
    def on_daemon(&block)
      @daemon_listeners << block
    end

    # --- what ProcessHooks calls ---------------------------------------------

    # In a forked child: drop what was inherited (the parent's samples) and
    # start a fresh run with the same options, unless the parent was
    # stopping. Never raises into the application.
    def restart_in_forked_child
      return unless active?

      @lock = Mutex.new # another thread may have held it at fork
      Native.stop(false)
      if @stopping # forked while another thread was stopping Sonde: the child stays stopped
        @continuous = nil
        @stopping = false
        return
      end

      Native.start(@options.native_settings)
      @continuous&.restart_in_child
    rescue StandardError => e
      warn "sonde: could not restart profiling in forked child #{Process.pid}: #{e.class}: #{e.message}"
    end

    # Process.daemon forks without Process._fork: the daemon restarts like a
    # forked child. Listeners never raise into the application.
    def before_daemon
      tell_daemon_listeners(:before)
    end

    def restart_in_daemon(parent_pid)
      restart_in_forked_child
      tell_daemon_listeners(:after, parent_pid)
    end

    def daemon_failed
      tell_daemon_listeners(:failed)
    end

    # Stops the run before exec (no SIGPROF may reach the new program) and
    # hands the profile to the exec listeners. Returns what
    # resume_after_failed_exec needs, nil when nothing was running.
    def pause_before_exec
      return nil unless active?

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

    private

    def tell_daemon_listeners(*event)
      @daemon_listeners.each { |listener| listener.call(*event) }
    rescue StandardError => e
      warn "sonde: around Process.daemon: #{e.class}: #{e.message}"
    end

    def check_capture_needs(alloc:, heap:)
      if heap && !@options.heap
        raise StateError, "the continuous run does not follow the live heap: start it with heap: true (SONDE_HEAP=1)"
      end
      return unless alloc && !@options.samples_allocations?

      raise StateError, "the continuous run does not sample allocations: start it with alloc: true (SONDE_ALLOC=1)"
    end

    def active?
      Native.loaded? && Native.active?
    end

    # Native.start lets other threads run while it waits for Sonde's threads;
    # one of them may fork, and the child restarts sampling from @options and
    # @continuous (restart_in_forked_child). So both are set before it, and
    # put back if it fails.
    def start_locked(options, exporters, muted_thread = nil)
      previous_options = @options
      @options = options
      @continuous = exporters && Continuous.new(options, exporters, self)
      settings = options.native_settings
      settings = settings.merge(muted_thread: muted_thread).freeze if muted_thread
      begin
        Native.start(settings)
      rescue Exception # rubocop:disable Lint/RescueException -- undo, whatever stopped the start, then re-raise
        @options = previous_options
        @continuous = nil
        raise
      end
      @continuous&.start
    end

    def build_exporters(options)
      require_relative "exporters"
      # Errors name the setting as the user gave it: the keyword or the variable.
      source = options.sources.fetch(:export, "export").to_s
      Exporters.from_specs(options.export_specs, option_name: source.start_with?("SONDE_") ? source : "export",
                                                 service: options.service)
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

    def raise_sampling_failure(failure, profile)
      raise SamplingError.new("sampling failed and stopped early (the application was not interrupted): " \
                              "#{failure.class}: #{failure.message}", profile), cause: failure
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
