# frozen_string_literal: true

require_relative "native"

module Sonde
  # How a live capture's request thread waits for the seconds it asked:
  # muted, so that its own wait (asleep, under its request's endpoint) is
  # not in the profile it answers; and cut short when the client has gone
  # away (Go's handler stops when its request's context ends), so an
  # abandoned capture does not hold a server thread, and every other
  # capture, for the rest of its seconds.
  module CaptureWait
    # How often the client is checked: a capture ends within this long of
    # its client leaving.
    POLL_SECONDS = 0.2

    class << self
      # Runs the block with the calling thread's wall samples left out (to
      # the end of the block: the capture's last flush or stop included).
      def muted
        mute(true)
        yield
      ensure
        mute(false)
      end

      # Waits seconds, or until cancelled (a callable, or nil) says true;
      # returns true when cancelled.
      def wait(seconds, cancelled)
        deadline = now + seconds
        loop do
          left = deadline - now
          return false if left <= 0
          return true if asked_to_stop?(cancelled)

          sleep([left, POLL_SECONDS].min)
        end
      end

      private

      def asked_to_stop?(cancelled)
        cancelled ? cancelled.call == true : false
      rescue StandardError
        false
      end

      def mute(muted)
        Native.mute_thread(Thread.current, muted) if Native.running?
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end
