# frozen_string_literal: true

require "socket"
require "timeout"
require_relative "../errors"

module Sonde
  module Exporters
    # A delivery failed in a way that may pass on a later attempt (connection
    # refused or reset, timeout, HTTP 5xx or 429, a full disk): retried.
    class RetryableError < Sonde::Error; end

    # A delivery failed in a way a retry cannot fix (HTTP 4xx other than 429):
    # counted as failed at once.
    class PermanentError < Sonde::Error; end

    # The machinery every exporter shares: a bounded queue, one background
    # Ruby thread that delivers from it, retries with exponential backoff,
    # and counters. Subclasses implement #deliver(exported_profile) and the
    # class methods Registry lists (kind, declared once, among them).
    #
    # Threads: #export, #stats and #shutdown run on application threads and
    # only take @lock for a few instructions, so a slow, down or failing
    # target never holds up the application. #deliver runs on the exporter's
    # own thread ("sonde-export-<kind>"), which is started lazily by the first
    # #export, and again in a forked child (a child inherits no threads).
    # Nothing raised while delivering reaches an application thread: it is
    # counted as failed and kept in stats[:last_error]. The first failure,
    # and the first after a success, is also one warning on stderr, so an
    # exporter that writes nothing never looks healthy.
    class Base
      # Backoff before the first retry, doubled before each further retry.
      INITIAL_BACKOFF = 0.5
      BACKOFF_FACTOR = 2
      # How long #shutdown waits for the queue to drain when not told.
      DEFAULT_SHUTDOWN_TIMEOUT = 5
      # After a drain timed out, how long to wait for the killed thread to end.
      KILL_JOIN_TIMEOUT = 1
      # Errors that say the target was unreachable or slow, worth a retry.
      # Net::OpenTimeout, ReadTimeout and WriteTimeout are Timeout::Errors;
      # ECONNREFUSED and friends are SystemCallErrors; an EOF mid-response is
      # an IOError. SocketError covers name resolution.
      TRANSIENT_ERRORS = [RetryableError, Timeout::Error, SystemCallError, IOError, SocketError].freeze

      attr_reader :settings

      def initialize(settings)
        @settings = settings
        reset_process_state
      end

      # Queues the profile for delivery and returns at once (true). When the
      # queue is full the oldest queued profile is dropped and counted. Never
      # raises: when no thread can be started (late in interpreter exit), the
      # profile is counted as dropped and false returned.
      def export(exported_profile)
        reset_process_state if @pid != Process.pid
        first_drop = false
        @lock.synchronize do
          if @queue.size >= settings.queue_size
            @queue.shift
            @stats[:dropped] += 1
            first_drop = !@warned_drop
            @warned_drop = true
          end
          @queue << exported_profile
          start_thread_locked
          @wakeup.signal
        end
        warn_drop if first_drop
        true
      rescue StandardError => e
        @lock.synchronize do
          @stats[:dropped] += @queue.size
          @queue.clear
          @stats[:last_error] = describe(e)
        end
        false
      end

      # {exported:, failed:, dropped:, retries:, last_error:} since creation
      # (or since the fork that made this process).
      def stats
        reset_process_state if @pid != Process.pid
        @lock.synchronize { @stats.dup }
      end

      # Delivers what is queued, waiting at most timeout seconds, then stops
      # the thread. Returns true when everything queued was handled (exported
      # or failed), false when the timeout cut it short: the profile in
      # flight then counts as failed and those still queued as dropped.
      # #export after #shutdown starts a new thread.
      def shutdown(timeout: DEFAULT_SHUTDOWN_TIMEOUT)
        return true if @pid != Process.pid # the thread belonged to the parent
        return false if Thread.current == @thread # a thread cannot wait for itself

        thread = @lock.synchronize do
          @stopping = true
          @wakeup.broadcast
          @thread
        end
        drained = thread.nil? || !thread.join(timeout).nil?
        abandon(thread, timeout) unless drained
        @lock.synchronize do
          @thread = nil
          @stopping = false
        end
        drained
      end

      # The class's kind ("dir", "pyroscope", "datadog"): the one name of an
      # exporter, in export entries, its thread's name, its stats and its
      # messages.
      def kind
        self.class.kind
      end

      private

      # Sends one profile; raises RetryableError or PermanentError (or any
      # exception) when it did not arrive. Runs on the exporter's thread.
      def deliver(_exported_profile)
        raise NotImplementedError
      end

      # State that belongs to one process (checked by pid on each call: the
      # first call in a child resets; only the forking thread survives a fork,
      # so there is no other thread to race with at that point unless the
      # child starts threads before its first call). A child starts afresh:
      # no thread (it did not survive the fork), an empty queue (the parent
      # delivers its own profiles), zeroed counters and a fresh lock, since
      # the parent's may have been held by a thread that no longer exists.
      def reset_process_state
        @pid = Process.pid
        @lock = Mutex.new
        @wakeup = ConditionVariable.new
        @queue = []
        @thread = nil
        @stopping = false
        @in_flight = false
        @failing = false # true from a failure until the next success: warned once
        @warned_drop = false # a full queue is warned about once per process
        @stats = { exported: 0, failed: 0, dropped: 0, retries: 0, last_error: nil }
      end

      def start_thread_locked
        return if @thread&.alive?

        @thread = Thread.new { run_without_raising }
        @thread.name = "sonde-export-#{kind}"
        @thread.report_on_exception = false
      end

      def run_without_raising
        while (exported_profile = next_profile)
          deliver_with_retries(exported_profile)
          @lock.synchronize { @in_flight = false }
        end
      rescue Exception => e # rubocop:disable Lint/RescueException -- even a kill-time error must stay on this thread
        record_failure(e)
      end

      # Waits for work; nil once stopping and the queue is empty.
      def next_profile
        @lock.synchronize do
          @wakeup.wait(@lock) while @queue.empty? && !@stopping
          @in_flight = !@queue.empty?
          @queue.shift
        end
      end

      def deliver_with_retries(exported_profile)
        deadline = monotonic_now + settings.retry_budget
        backoff = INITIAL_BACKOFF
        attempt = 1
        begin
          deliver(exported_profile)
          @lock.synchronize do
            @stats[:exported] += 1
            @failing = false
          end
        rescue *TRANSIENT_ERRORS => e
          wait = [backoff, deadline - monotonic_now].min
          return record_failure(e) if attempt >= settings.max_attempts || wait <= 0

          @lock.synchronize do
            @stats[:retries] += 1
            @stats[:last_error] = describe(e)
          end
          sleep_interruptibly(wait)
          backoff *= BACKOFF_FACTOR
          attempt += 1
          retry
        rescue StandardError => e
          record_failure(e)
        end
      end

      # Backoff that #shutdown can cut short, so a drain does not sit idle.
      def sleep_interruptibly(seconds)
        @lock.synchronize { @wakeup.wait(@lock, seconds) unless @stopping }
      end

      def record_failure(error)
        first = @lock.synchronize do
          @stats[:failed] += 1
          @stats[:last_error] = describe(error)
          !@failing.tap { @failing = true }
        end
        warn_failure(error) if first
      end

      # One line per run of failures: the kind, the error, where the rest go.
      def warn_failure(error)
        say "failed in process #{Process.pid} (profiles are not reaching it; " \
            "later failures are counted in Sonde.stats[:exporters] until one succeeds): #{describe(error)}"
      end

      # The drain timed out: stop the thread wherever it is (Thread#kill
      # interrupts a blocking read) and count what it could not deliver.
      def abandon(thread, timeout)
        thread.kill
        thread.join(KILL_JOIN_TIMEOUT)
        in_flight, queued = @lock.synchronize do
          counts = [@in_flight ? 1 : 0, @queue.size]
          if @in_flight
            @stats[:failed] += 1
            @stats[:last_error] = "#{kind} export still in flight at shutdown"
            @in_flight = false
          end
          @stats[:dropped] += @queue.size
          @queue.clear
          counts
        end
        warn_abandoned(timeout, in_flight, queued)
      end

      # A full queue means the target takes longer than a period per
      # profile: said once, since every later drop has the same cause.
      def warn_drop
        say "dropped its oldest queued profile in process #{Process.pid}: its queue " \
            "(queue_size #{settings.queue_size}) was full, the target is slower than profiles are made " \
            "(later drops are counted in Sonde.stats[:exporters])"
      end

      # Profiles lost at stop or exit are the last ones, the most wanted: never silently.
      def warn_abandoned(timeout, in_flight, queued)
        say "had not finished within #{timeout} s of shutdown in process #{Process.pid}: " \
            "#{in_flight} profile in flight failed, #{queued} queued dropped (#{@stats[:exported]} exported before)"
      end

      def say(what)
        warn "sonde: the #{kind} exporter #{what}"
      rescue StandardError
        nil # a closed or broken $stderr must not reach the application or the exporter's thread
      end

      def describe(error)
        "#{error.class}: #{error.message}"
      end

      def monotonic_now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end
