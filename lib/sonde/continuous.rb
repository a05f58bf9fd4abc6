# frozen_string_literal: true

require "socket"
require_relative "version"
require_relative "capture_wait"

module Sonde
  # Continuous mode: a background Ruby thread ("sonde-flusher") flushes the
  # profile every `every` seconds and hands it to the exporters, while
  # sampling goes on. A last flush happens at stop (and so at exit). The
  # flusher never raises into the application: a failed flush or export is
  # counted and warned about once. The profile's tags go into the pprof as
  # comments ("service=web", `go tool pprof -comments` lists them), written
  # by the encoder at the flush, and to the exporters beside it.
  #
  # Runs on the flusher thread; start/stop on the caller's thread. A
  # flusher that the application kills (Thread#kill through Sonde.threads)
  # is replaced at once by another, with one warning, as the idle helper is:
  # without it no period would be exported again until exit.
  class Continuous
    attr_reader :exporters, :flushes, :errors, :flusher_restarts

    # session: the Sonde::Session whose run this flushes.
    def initialize(options, exporters, session)
      @options = options
      @exporters = exporters
      @session = session
      @flushes = 0
      @errors = 0
      @flusher_restarts = 0
      @thread = nil
    end

    def start
      @pid = Process.pid
      # Fresh in a forked child too: the parent's flusher may have held them.
      @lock = Mutex.new
      @wakeup = ConditionVariable.new
      @stopping = false
      # Who ends a period: the flusher's tick, or a live capture's start and
      # end. A child forked during a capture has no capture thread, so
      # nothing may stay held.
      @period_lock = Mutex.new
      @capturing = false
      start_flusher
      self
    end

    # Exports what was recorded since the last flush (the profile Sonde.stop
    # returns, encoded with tags) and waits, at most `timeout` seconds, for
    # the exporters.
    def finish(profile, tags, timeout: SHUTDOWN_SECONDS)
      stop_thread
      export(profile, tags) if profile
    ensure
      # Whatever happened, what is queued gets its chance to be delivered
      # before the process exits or execs.
      @exporters.each { |exporter| exporter.shutdown(timeout: timeout) }
    end
    SHUTDOWN_SECONDS = 5
    # Why a second live capture is refused (Sonde::PprofApp answers 409 with it).
    CAPTURE_BUSY = "a capture is already running in this process; try again when it ends"
    NANOS_PER_SECOND = 1_000_000_000

    # One Hash per exporter, in the order they were given: kind, then the
    # exporter's counters (exported, failed, dropped, retries, last_error).
    def exporter_stats
      @exporters.map { |exporter| { kind: exporter.kind }.merge(exporter.stats) }
    end

    # In a forked child the flusher thread did not survive: start another.
    def restart_in_child
      @thread = nil
      start
    end

    # The tags every profile carries; pid and host are read at each export,
    # so a forked worker's profiles carry its own pid.
    def tags
      tags = { "service" => @options.service, "host" => Socket.gethostname, "pid" => Process.pid.to_s,
               "runtime" => "ruby", "runtime_version" => RUBY_VERSION, "sonde_version" => Sonde::VERSION }
      tags["env"] = @options.env if @options.env
      tags["version"] = @options.version if @options.version
      @options.tags.merge(tags) { |_key, user, ours| %w[pid host].include?(_key) ? ours : user }
    end

    # "key=value" for each tag, sorted by key, so that files compare.
    def self.comments(tags)
      tags.map { |key, value| "#{key}=#{value}" }.sort
    end

    def export(profile, tags)
      require_relative "exporters"
      # The duration is a Float of seconds: rounded to whole nanoseconds the
      # end is exact, as in the pprof, rather than a nanosecond short once
      # printed with 9 decimals (Datadog's event.json).
      duration = Rational((profile.duration * NANOS_PER_SECOND).round, NANOS_PER_SECOND)
      exported = ExportedProfile.new(pprof: profile.pprof, start_time: profile.start_time,
                                     end_time: profile.start_time + duration, tags: tags)
      @exporters.each { |exporter| exporter.export(exported) }
      ignore_exporter_threads
    end

    # Flushes now (a period ends here), exports the period and returns its
    # Sonde::Profile: the flusher's tick, and a live capture's bounds
    # (Sonde::PprofApp). Raises what Sonde.flush raises.
    def flush_now
      tags = self.tags
      profile = @session.flush(comments: Continuous.comments(tags))
      export(profile, tags)
      @flushes += 1
      profile
    end

    # A live capture (Sonde::PprofApp) of the next seconds: a period of its
    # own, cut at its start and end and exported like any other, returned
    # as a Sonde::Profile. The flusher's ticks that fall inside it are
    # skipped: one would cut the capture short (with every: 1 a 3-second
    # capture answered with the last 27 ms). The period after the capture
    # ends at the flusher's next tick, so no period is longer than the
    # longer of `every` and the capture. One at a time: StateError for a
    # second. Raises what Sonde.flush raises.
    #
    # The calling thread is muted before the flush that opens the capture:
    # that flush encodes the period before it with the GVL released, and a
    # pass meanwhile put the caller's wait for the GVL, in Native.flush,
    # into the capture's period (5 captures of 5 beside a busy thread).
    def capture(seconds, cancelled: nil)
      CaptureWait.muted { period_around { CaptureWait.wait(seconds, cancelled) } }
    end

    # Runs the block in a period of its own, cut at its start and end and
    # exported like any other (Sonde.profile in continuous mode; a live
    # capture's wait). Returns that period's Sonde::Profile; closed, the
    # same profile, is called with it before the block's exception, if
    # any, goes on. One at a time: StateError for a second.
    def period_around(closed = nil)
      @period_lock.synchronize do
        raise StateError, CAPTURE_BUSY if @capturing

        flush_now
        @capturing = true
      end
      begin
        yield
      ensure
        begin
          profile = @period_lock.synchronize { flush_now }
          closed&.call(profile)
        ensure
          @capturing = false
        end
      end
      profile
    end

    private

    # Returns once the thread runs inside run_flusher's ensure: a thread
    # killed before it ran its block would end without it, and unreplaced.
    def start_flusher
      running = Queue.new
      @thread = Thread.new { run_flusher(running) }
      @thread.name = "sonde-flusher"
      @thread.report_on_exception = false
      Native.ignore_thread(@thread)
      running.pop
    end

    # The loop ends only when stopping; anything else that ends it (a kill,
    # an exception that is not a StandardError) leaves the run unflushed.
    def run_flusher(running)
      running.push(true)
      flush_loop
    ensure
      replace_ended_flusher unless @stopping
    end

    # A flusher that keeps ending (an exception flush_once cannot rescue,
    # raised again at each start) is not replaced forever.
    MAX_FLUSHER_RESTARTS = 100

    # Runs on the ending flusher thread, in its ensure.
    def replace_ended_flusher
      return unless @pid == Process.pid && Native.active?

      if @flusher_restarts >= MAX_FLUSHER_RESTARTS
        warn "sonde: Sonde's flusher thread ended #{@flusher_restarts + 1} times; not started again " \
             "(periods are exported at stop only)"
        return
      end
      start_flusher
      @flusher_restarts += 1
      return unless @flusher_restarts == 1

      warn "sonde: Sonde's flusher thread (sonde-flusher) was killed; a new one was started " \
           "(Sonde.stats[:flusher_restarts] counts them)"
    rescue StandardError => e
      warn "sonde: Sonde's flusher thread was killed and could not be started again " \
           "(periods are exported at stop only): #{e.class}: #{e.message}"
    end

    def flush_loop
      until wait_for_stop(@options.every)
        flush_once
      end
    end

    # Sleeps `seconds` or until stop; true when stopping.
    def wait_for_stop(seconds)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      @lock.synchronize do
        until @stopping
          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          break if left <= 0

          @wakeup.wait(@lock, left)
        end
        @stopping
      end
    end

    def flush_once
      @period_lock.synchronize do
        # A capture is running: its end ends this period.
        return :deferred if @capturing

        flush_now
      end
    rescue Sonde::StateError
      :stopped
    rescue StandardError => e
      @errors += 1
      warn "sonde: continuous flush failed (profiling goes on): #{e.class}: #{e.message}" if @errors == 1
    end

    public

    # Ends the flusher (before the profiler stops, so it cannot flush a
    # profiler that is going away).
    def stop_thread
      return unless @thread && @pid == Process.pid

      @lock.synchronize do
        @stopping = true
        @wakeup.signal
      end
      @thread.join unless @thread == Thread.current
      @thread = nil
    end

    # Leaves the exporters' threads out of profiles. Not once the profiler
    # has stopped: the last period is exported after Sonde.stop (at exit,
    # before exec), when there is no profile left to keep them out of and
    # Native.ignore_thread would raise, losing that period.
    def ignore_exporter_threads
      return unless Native.active?

      Thread.list.each do |thread|
        next unless thread.name.to_s.start_with?("sonde-export")
        next if (@ignored ||= {}).key?(thread)

        @ignored[thread] = Native.ignore_thread(thread)
      end
    end
  end
end
