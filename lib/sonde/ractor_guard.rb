# frozen_string_literal: true

require_relative "platform"

module Sonde
  # Ractor.new while Sonde runs, prepended to Ractor's singleton class when
  # Sonde loads:
  # - the run counts the Ractors the main Ractor creates: their threads are
  #   not sampled (only the main Ractor's are), and the stats, the profile's
  #   comments and `sonde report` say how many ran and how much CPU the
  #   profile leaves out (ext/sonde/ractor_accounting.c);
  # - allocation sampling is turned off for the rest of the run first, with
  #   one warning: on Ruby 3.1 and 3.2 a NEWOBJ hook crashes the VM while a
  #   Ractor is created (Ruby bug #18464: the new Ractor's first objects
  #   fire the hook before its first frame exists; fixed in Ruby 3.3); on
  #   3.3+ allocation sampling with flushes while other Ractors ran crashed
  #   the VM in their GC (cause not found; docs/production.md has the
  #   counts), and its samples would cover the main Ractor only.
  # A Ractor made by another Ractor passes straight through: Sonde's core
  # may only be called from the main Ractor, and no hook of Sonde's runs in
  # the creating Ractor.
  module RactorGuard
    # Rubies whose NEWOBJ hook crashes while a Ractor is created.
    NEWOBJ_HOOK_BREAKS_RACTOR_NEW = !Platform.ruby_at_least?("3.3")

    WARNING = if NEWOBJ_HOOK_BREAKS_RACTOR_NEW
                "sonde: allocation profiling stopped before Ractor.new: on Ruby #{RUBY_VERSION} an allocation " \
                  "hook crashes the VM while a Ractor is created (Ruby bug #18464, fixed in Ruby 3.3); CPU and " \
                  "wall-time profiling go on, and the allocations sampled so far stay in the profile"
              else
                "sonde: allocation profiling stopped before Ractor.new: on Ruby #{RUBY_VERSION} allocation " \
                  "sampling while other Ractors run can crash the VM in their GC (seen in Sonde's tests, cause " \
                  "not found yet), and would sample the main Ractor's allocations only; CPU and wall-time " \
                  "profiling go on, and the allocations sampled so far stay in the profile"
              end

    @warned = false

    module_function

    def before_ractor_new
      return unless Ractor.current == Ractor.main && Native.loaded?

      Native.ractor_created
      return unless Native.turn_off_allocations
      return if @warned

      @warned = true
      warn WARNING
    end

    # Prepended to Ractor.singleton_class.
    module New
      def new(*arguments, **keywords, &block)
        RactorGuard.before_ractor_new
        super
      end
    end

    def install
      return if @installed

      @installed = true
      Ractor.singleton_class.prepend(New)
    end
  end
end
