# frozen_string_literal: true

require_relative "platform"

module Sonde
  # Ractor.new while Sonde runs, heard by a TracePoint on that one method,
  # enabled when Sonde loads:
  # - the run counts the Ractors the main Ractor creates: their threads are
  #   not sampled (only the main Ractor's are), and the stats, the profile's
  #   comments and `sonde report` say how many ran and how much CPU the
  #   profile leaves out (ext/sonde/ractor_accounting.c);
  # - where a NEWOBJ hook is not safe while Ractors exist, allocation
  #   sampling is turned off for the rest of the run first, with one
  #   warning naming Ruby's bug:
  #   - Ruby 3.1 and 3.2: the hook crashes the VM while a Ractor is created
  #     (Ruby bug #18464: the new Ractor's first objects fire the hook
  #     before its first frame exists; fixed in Ruby 3.3);
  #   - Ruby 3.4: with a NEWOBJ hook on, a new object's slot is cleared
  #     only after its allocation takes the VM lock, and waiting for that
  #     lock lets another Ractor's GC run meanwhile and mark the half-made
  #     object from the allocating thread's stack (ruby/ruby pull request
  #     #14596). Ruby's own ObjectSpace.trace_object_allocations_start
  #     crashes the same way (test/stress/ractors_test.rb).
  #   Ruby 3.3 takes the VM lock before it makes the object, so no GC sees
  #   it half-made: there allocation sampling goes on, over the main
  #   Ractor's allocations only (the hook is the main Ractor's).
  # A Ractor made by another Ractor passes straight through: Sonde's core
  # may only be called from the main Ractor, and a TracePoint fires only in
  # the Ractor that enabled it.
  #
  # Not a prepend on Ractor.new: Ruby warns "Ractor is experimental" at
  # the caller of its Ractor.new, which a prepend made Sonde's file
  # ("lib/sonde/ractor_guard.rb:68: warning: ..." instead of the user's
  # line, seen on 3.3 and 3.4). A TracePoint adds no frame; targeted at
  # Ractor.new's method, it costs nothing anywhere else.
  module RactorGuard
    # Rubies whose NEWOBJ hook crashes while a Ractor is created.
    NEWOBJ_HOOK_BREAKS_RACTOR_NEW = !Platform.ruby_at_least?("3.3")
    # Rubies whose NEWOBJ hook lets another Ractor's GC mark a half-made
    # object. Newer Rubies are assumed to have it until one is tested
    # without it.
    NEWOBJ_HOOK_EXPOSES_HALF_MADE_OBJECTS = Platform.ruby_at_least?("3.4")
    # Whether allocation sampling must stop before a Ractor is created.
    ALLOCATIONS_STOP_BEFORE_RACTORS = NEWOBJ_HOOK_BREAKS_RACTOR_NEW || NEWOBJ_HOOK_EXPOSES_HALF_MADE_OBJECTS

    REASON = if NEWOBJ_HOOK_BREAKS_RACTOR_NEW
               "an allocation hook crashes the VM while a Ractor is created (Ruby bug #18464, fixed in Ruby 3.3)"
             else
               "an allocation hook lets another Ractor's GC mark a half-made object, which crashes the VM " \
                 "(ruby/ruby pull request #14596; ObjectSpace.trace_object_allocations crashes the same way)"
             end
    WARNING = "sonde: allocation profiling stopped before Ractor.new: on Ruby #{RUBY_VERSION} #{REASON}; CPU and " \
              "wall-time profiling go on, and the allocations sampled so far stay in the profile"

    @warned = false

    module_function

    def before_ractor_new
      return unless Ractor.current == Ractor.main && Native.loaded?

      Native.ractor_created
      return unless ALLOCATIONS_STOP_BEFORE_RACTORS && Native.turn_off_allocations
      return if @warned

      @warned = true
      warn WARNING
    end

    def install
      return if @installed

      @installed = true
      @hook = TracePoint.new(:call) { RactorGuard.before_ractor_new }
      @hook.enable(target: Ractor.method(:new))
    end
  end
end
