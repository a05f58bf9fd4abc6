# frozen_string_literal: true

module Sonde
  module Exporters
    # The exporter kinds continuous mode knows, each an exporter class that
    # registered itself (Registry.register(Directory) at the end of its
    # file). Options validates export entries against it, Exporters.parse
    # builds from it, and the "accepted:" of every export error lists it, so
    # adding an exporter is one file that registers its class.
    #
    # An exporter class answers:
    #   kind          "dir": the entry's prefix ("dir:PATH") and the Hash form's kind:
    #   target_name   "PATH": how the README and error messages name the target
    #   target_key    :path: the target's key in the Hash form
    #   option_names  the Settings rows it takes, beyond Settings::COMMON
    #   check_target(text) -> target, or raise TargetError (pure: at Options)
    #   prepare_target(target) -> target, or raise TargetError (at start:
    #                 may touch the disk, e.g. create the directory)
    #   new(target, settings)
    module Registry
      @classes = {}
      @lock = Mutex.new

      class << self
        # Adds (or replaces) the exporter class for its kind.
        def register(exporter_class)
          @lock.synchronize { @classes = @classes.merge(exporter_class.kind.to_s => exporter_class).freeze }
          exporter_class
        end

        # Removes a kind (for tests that registered one of their own).
        def unregister(kind)
          @lock.synchronize { @classes = @classes.reject { |name, _| name == kind.to_s }.freeze }
        end

        # The class for kind (a String or Symbol), or nil.
        def fetch(kind)
          @classes[kind.to_s]
        end

        def kinds
          @classes.keys
        end

        # "dir:PATH, pyroscope:URL, datadog:URL"
        def forms
          @classes.values.map { |exporter_class| "#{exporter_class.kind}:#{exporter_class.target_name}" }.join(", ")
        end
      end
    end

    # A target an exporter cannot use; the message says why (Exporters.parse
    # puts it into the error that names the option and the entry).
    class TargetError < StandardError; end
  end
end
