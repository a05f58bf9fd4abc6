# frozen_string_literal: true

require "sonde/pprof"
require "sonde/profile_names"

module Sonde
  module Converters
    # A profile's samples folded by (thread, state, stack of functions), and
    # by labels when asked (labels: one name, or :all for every label but
    # the thread and state ones Sonde writes itself): the common input of
    # every derived format (flame graph page, collapsed stacks, speedscope).
    # Lines are dropped and functions are grouped by name and file, as the
    # text report groups them, so a loop that shows at ten lines of one
    # method is one frame, and the output stays small.
    #
    #   stacks = Sonde::Converters::Stacks.new(Sonde::Pprof.read("app.pprof"))
    #   stacks.rows.each { |row| row.frames.map { |i| stacks.functions[i].name } } # root first
    class Stacks
      Function = Struct.new(:name, :filename, :start_line) do
        def location
          return filename if start_line.zero? || filename.empty?

          "#{filename}:#{start_line}"
        end
      end

      # A thread is known by its "thread id" label; it keeps the name it had
      # for most of its samples (a thread renamed right after it started).
      ThreadInfo = Struct.new(:id, :name) do
        def label
          return name if name && !name.empty?

          id.nil? ? "(unknown thread)" : "thread #{id}"
        end
      end

      # frames: function indexes, root first. values: one per sample type.
      # labels: the folded-by labels the rows' samples carry (a frozen Hash
      # of String => String, empty when they carry none or none was asked).
      Row = Struct.new(:thread, :state, :frames, :values, :labels)
      NO_LABELS = {}.freeze

      attr_reader :sample_types, :functions, :threads, :states, :rows

      # labels: nil (rows ignore labels), a label name, or :all.
      def initialize(profile, labels: nil)
        @profile = profile
        @labels = ProfileNames.all.fetch(:labels)
        @own_labels = @labels.values
        @folded_labels = labels
        @label_sets = {}
        @sample_types = profile.sample_types
        @functions = []
        @function_ids = {}
        @location_functions = {}
        @thread_ids = {}
        @thread_names = []
        @state_ids = {}
        @rows = []
        fold(profile.samples)
        @threads = @thread_ids.keys.each_with_index.map do |id, i|
          ThreadInfo.new(id, @thread_names[i].max_by { |_name, count| count }&.first)
        end
        @states = @state_ids.keys
      end

      # The label names the samples carry, Sonde's own included, sorted.
      def label_names
        @profile.samples.flat_map { |sample| sample.labels.keys }.uniq.sort
      end

      # The one label name the rows were folded by, or nil.
      def label_name
        @folded_labels.is_a?(String) ? @folded_labels : nil
      end

      # Index of the sample type named type_name, or nil.
      def type_index(type_name)
        @sample_types.index { |type, _unit| type == type_name }
      end

      private

      def fold(samples)
        by_key = {}
        width = @sample_types.size
        samples.each do |sample|
          labels = sample.labels
          key = [thread_index(labels), state_index(labels), frames(sample.location_ids), folded_labels(labels)]
          row = (by_key[key] ||= @rows.push(Row.new(*key.first(3), Array.new(width, 0), key.last)).last)
          values = row.values
          sample.values.each_with_index { |value, i| values[i] += value }
        end
      end

      def thread_index(labels)
        id = labels[@labels.fetch(:thread_id)]
        index = (@thread_ids[id] ||= @thread_ids.size)
        names = (@thread_names[index] ||= Hash.new(0))
        name = labels[@labels.fetch(:thread_name)]
        # A profile from elsewhere may carry the name as a number label.
        names[name.to_s] += 1 unless name.nil?
        index
      end

      # The labels rows fold by, one frozen Hash per distinct set.
      def folded_labels(labels)
        folded =
          case @folded_labels
          when nil then NO_LABELS
          when :all then labels.reject { |name, _value| @own_labels.include?(name) }
          else labels.slice(@folded_labels)
          end
        return NO_LABELS if folded.empty?

        folded = folded.to_h { |name, value| [name, value.to_s] }
        @label_sets[folded] ||= folded.freeze
      end

      # nil when the profile has no state label (not one of Sonde's).
      def state_index(labels)
        state = labels[@labels.fetch(:state)]
        state && (@state_ids[state] ||= @state_ids.size)
      end

      # Root first, as every derived format wants it.
      def frames(location_ids)
        location_ids.reverse.map { |id| @location_functions[id] ||= function_index(id) }
      end

      def function_index(location_id)
        location = @profile.locations.fetch(location_id)
        function = @profile.functions.fetch(location.function_id, Pprof::UNKNOWN_FUNCTION)
        key = [function.name, function.filename]
        @function_ids[key] ||= @functions.push(Function.new(function.name, function.filename,
                                                            function.start_line)).size - 1
      end
    end
  end
end
