# frozen_string_literal: true

require_relative "wrap_in_place"

module Sonde
  # Ruby's trap("PROF") while Sonde samples with signals: the trigger thread
  # may have decided to send SIGPROF a moment before the new disposition is
  # set, and if that disposition is "DEFAULT" the signal kills the process
  # ("Profiling timer expired"). So a trap of PROF first tells the native
  # core to give SIGPROF up (it waits for a send in progress), then traps:
  # sampling goes on as in no-signals mode, Sonde.stats[:signal_handler_lost]
  # says so, and the application's disposition is left as it set it.
  # Kernel#trap, Kernel.trap and Signal.trap all come here; traps of other
  # signals pass straight through.
  module TrapGuard
    PROF_NAMES = %w[PROF SIGPROF].freeze

    module_function

    def sigprof?(signal)
      case signal
      when Integer then signal == Signal.list["PROF"]
      when String, Symbol then PROF_NAMES.include?(signal.to_s.upcase)
      else false
      end
    end

    def before_trap(signal)
      return unless sigprof?(signal) && Native.loaded?

      Native.give_up_signals
    end

    # For Signal.trap and Kernel.trap, prepended to their singleton classes.
    # Kernel#trap is wrapped in place (WrapInPlace says why).
    module SingletonTrap
      def trap(signal, *arguments, &block)
        TrapGuard.before_trap(signal)
        super
      end
    end

    def install
      return if @installed

      @installed = true
      WrapInPlace.wrap(Kernel, :trap) do |original, signal|
        before_trap(signal)
        original.call
      end
      Kernel.singleton_class.prepend(SingletonTrap)
      Signal.singleton_class.prepend(SingletonTrap)
    end
  end
end
