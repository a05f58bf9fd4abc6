# frozen_string_literal: true

require_relative "../errors"

module Sonde
  module Exporters
    # The exporter kinds continuous mode knows, each an exporter class that
    # registered itself (Registry.register(Directory) at the end of its
    # file). Options validates export entries against it, Exporters.parse
    # builds from it, and the "accepted:" of every export error lists it, so
    # adding an exporter is one file that registers its class. One class per
    # kind: a second registration of a kind is refused, and the built-in
    # kinds belong to their own classes.
    #
    # An exporter class answers:
    #   kind          "dir": the entry's prefix ("dir:PATH") and the Hash form's kind:,
    #                 the exporter's thread name, stats and messages (Base#kind)
    #   target_name   "PATH": how the docs and error messages name the target
    #   target_key    :path: the target's key in the Hash form
    #   option_names  the Settings rows it takes, beyond Settings::COMMON
    #   check_target(text) -> target, or raise TargetError (pure: at Options)
    #   prepare_target(target) -> target, or raise TargetError (at start:
    #                 may touch the disk, e.g. create the directory)
    #   new(target, settings)
    module Registry
      # The kinds Sonde ships, each a class that loads when its kind is first
      # named (Exporters autoloads it): a run exporting to dir: never loads
      # the HTTP exporters, nor json, time and uri with them.
      BUILT_IN = { "dir" => :Directory, "pyroscope" => :Pyroscope, "datadog" => :Datadog, "otlp" => :Otlp }.freeze

      @classes = {}
      @lock = Mutex.new

      class << self
        # Adds the exporter class for its kind. Raises Sonde::ArgumentError
        # when the kind is taken (unregister it first) or is a built-in kind
        # and the class is not the built-in one.
        def register(exporter_class)
          kind = exporter_class.kind.to_s
          built_in = BUILT_IN[kind] && "#{Exporters.name}::#{BUILT_IN[kind]}"
          if built_in && exporter_class.name != built_in
            raise Sonde::ArgumentError, "exporter kind #{kind.inspect} is Sonde's own (#{built_in}); " \
                                        "register #{exporter_class} under another kind"
          end
          @lock.synchronize do
            if (taken = @classes[kind])
              raise Sonde::ArgumentError, "exporter kind #{kind.inspect} is already registered (#{taken}); " \
                                          "unregister it before registering #{exporter_class}"
            end
            @classes = @classes.merge(kind => exporter_class).freeze
          end
          exporter_class
        end

        # Removes a kind (for tests that registered one of their own).
        def unregister(kind)
          @lock.synchronize { @classes = @classes.reject { |name, _| name == kind.to_s }.freeze }
        end

        # The class for kind (a String or Symbol), or nil.
        def fetch(kind)
          kind = kind.to_s
          @classes[kind] || load_built_in(kind)
        end

        # Every kind, the built-in ones first (loading them: error messages
        # list them all).
        def kinds
          BUILT_IN.each_key { |kind| fetch(kind) }
          classes = @classes
          (BUILT_IN.keys & classes.keys) + (classes.keys - BUILT_IN.keys)
        end

        # "dir:PATH, pyroscope:URL, datadog:URL"
        def forms
          kinds.map { |kind| @classes.fetch(kind) }
               .map { |exporter_class| "#{exporter_class.kind}:#{exporter_class.target_name}" }.join(", ")
        end

        private

        # A built-in kind's class, loaded now; its file registers it.
        def load_built_in(kind)
          name = BUILT_IN[kind]
          return nil unless name

          Exporters.const_get(name, false)
          @classes[kind]
        end
      end
    end

    # A target an exporter cannot use; the message says why (Exporters.parse
    # puts it into the error that names the option and the entry).
    class TargetError < StandardError; end
  end
end
