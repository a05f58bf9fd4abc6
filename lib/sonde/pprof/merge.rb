# frozen_string_literal: true

require "sonde/pprof"

module Sonde
  module Pprof
    # Merges decoded profiles into one, as `go tool pprof a.pprof b.pprof`
    # does: they must have the same sample types (names and units, in the
    # same order); samples with the same stack (functions by name, file and
    # first line; lines) and the same labels become one sample whose values
    # are the sums. The merged profile starts at the earliest start, lasts
    # the sum of the durations, keeps the largest period, the first default
    # sample type and each distinct comment once. Its end_nanos is the
    # latest end of theirs: a fleet's workers run side by side.
    #
    # The live heap (heap-live-samples, heap-live-size) is a snapshot, not
    # a flow: summed over a process's periods, ten periods of one worker
    # read ten times its heap. Of each process (its "host=" and "pid="
    # comments, as continuous mode writes them) only the latest profile's
    # live heap counts; a profile without them is a process of its own.
    #
    #   Pprof::Merge.call([worker1, worker2], names: ["w1.pprof", "w2.pprof"])
    module Merge
      # The profiles cannot be merged; the message names the file and why.
      class IncompatibleError < Sonde::Error; end

      module_function

      # names label the profiles in errors (file names); profiles has at least one.
      def call(profiles, names: profiles.each_index.map { |i| "profile #{i + 1}" })
        each_merged(names) { |i| profiles[i] }
      end

      # Merges the profiles the block gives for each of names (the block
      # gets the index), one at a time: each is folded into the result and
      # dropped before the next is asked for, so memory follows the merged
      # profile, not the number of inputs (a day's periods of a fleet are
      # thousands of files: 1,200 copies of one 15-KB worker profile took
      # 638 MB read all first, as the first version of this did). One
      # profile comes back as it is. A block that gives nil leaves that
      # input out; nil when every input was left out.
      def each_merged(names)
        raise ::ArgumentError, "no profile to merge" if names.empty?
        return yield(0) if names.size == 1

        builder = nil
        names.each_index do |i|
          profile = yield(i)
          next if profile.nil?

          builder ||= Builder.new(profile, names[i])
          builder.add(profile, names[i])
        end
        builder&.call
      end

      def describe(sample_types)
        sample_types.map { |type, unit| "#{type}/#{unit}" }.join(", ")
      end

      # Re-numbers functions and locations by their fields across the inputs.
      class Builder
        # The sample types that are snapshots of a moment (the live heap).
        SNAPSHOT_TYPES = %w[heap-live-samples heap-live-size].freeze

        # first: the first profile, whose sample types every other must
        # have; first_name names it in errors.
        def initialize(first, first_name)
          @sample_types = first.sample_types
          @snapshot_indexes = @sample_types.each_index.select { |i| SNAPSHOT_TYPES.include?(@sample_types[i][0]) }
          # process => [its latest profile's end, {sample key => its snapshot values}]
          @snapshots = {}
          @profiles_added = 0
          @period_type = first.period_type
          @first_name = first_name
          @functions = {} # [name, filename, start_line] => Function
          @locations = {} # [function id, line] => Location
          @samples = {}   # [location ids, labels] => Sample
          @starts = []
          @duration_nanos = 0
          @end_nanos = nil
          @period = nil
          @comments = []
          @default_sample_type = nil
        end

        def add(profile, name)
          check_compatible(profile, name)
          @profiles_added += 1
          snapshot = snapshot_of(profile)
          add_samples(profile, snapshot)
          @starts << profile.time_nanos unless profile.time_nanos.zero?
          @duration_nanos += profile.duration_nanos
          @end_nanos = [@end_nanos, profile.end_nanos].compact.max
          @period = [@period, profile.period].compact.max
          @comments |= profile.comments
          @default_sample_type ||= profile.default_sample_type unless profile.default_sample_type.to_s.empty?
        end

        def call
          add_snapshots
          Profile.new(
            sample_types: @sample_types,
            samples: @samples.values,
            locations: @locations.values.to_h { |location| [location.id, location] },
            functions: @functions.values.to_h { |function| [function.id, function] },
            time_nanos: @starts.min || 0,
            duration_nanos: @duration_nanos,
            end_nanos: @end_nanos,
            period_type: @period_type,
            period: @period,
            comments: @comments,
            default_sample_type: @default_sample_type
          )
        end

        private

        def check_compatible(profile, name)
          return if profile.sample_types == @sample_types

          raise IncompatibleError,
                "#{name}: its sample types (#{Merge.describe(profile.sample_types)}) differ from " \
                "#{@first_name}'s (#{Merge.describe(@sample_types)}); only profiles of the same sample types merge"
        end

        # The map this profile's snapshot values go into: a fresh one when it
        # is its process's latest so far (the earlier one's is dropped), nil
        # when a later profile of its process came first.
        def snapshot_of(profile)
          return nil if @snapshot_indexes.empty?

          process = process_of(profile)
          ends = profile.end_nanos || (profile.time_nanos + profile.duration_nanos)
          latest = @snapshots[process]
          return nil if latest && latest[0] > ends

          (@snapshots[process] = [ends, {}])[1]
        end

        # Without a pid, the profile's place among the inputs: a process of
        # its own.
        def process_of(profile)
          host = profile.comments.find { |comment| comment.start_with?("host=") }
          pid = profile.comments.find { |comment| comment.start_with?("pid=") }
          pid ? [host, pid] : @profiles_added
        end

        def add_samples(profile, snapshot)
          location_ids = {} # this profile's location id => merged id
          profile.samples.each do |sample|
            stack = sample.location_ids.map { |id| location_ids[id] ||= merged_location(profile, id) }
            key = [stack, sample.labels.sort]
            values = sample.values
            unless @snapshot_indexes.empty?
              values = values.dup
              snapshot_values = @snapshot_indexes.map { |i| values[i].tap { values[i] = 0 } }
              if snapshot && snapshot_values.any?(&:nonzero?)
                # A profile may hold one stack and label set twice (another producer's).
                snapshot[key] = snapshot.key?(key) ? snapshot[key].zip(snapshot_values).map(&:sum) : snapshot_values
              end
              next if values.all?(&:zero?) && !@samples.key?(key)
            end
            add_values(key, stack, values, sample.labels)
          end
        end

        # Each process's latest live heap, into the samples.
        def add_snapshots
          @snapshots.each_value do |_ends, snapshot|
            snapshot.each do |(stack, labels), snapshot_values|
              values = Array.new(@sample_types.size, 0)
              @snapshot_indexes.each_with_index { |index, i| values[index] = snapshot_values[i] }
              add_values([stack, labels], stack, values, labels.to_h)
            end
          end
          @snapshots.clear
        end

        def add_values(key, stack, values, labels)
          merged = @samples[key]
          if merged
            merged.values = merged.values.zip(values).map(&:sum)
          else
            @samples[key] = Sample.new(location_ids: stack, values: values.dup, labels: labels.dup)
          end
        end

        def merged_location(profile, id)
          location = profile.locations.fetch(id)
          function_id = location.function_id.zero? ? 0 : merged_function(profile.functions.fetch(location.function_id))
          @locations[[function_id, location.line]] ||=
            Location.new(id: @locations.size + 1, function_id: function_id, line: location.line)
          @locations[[function_id, location.line]].id
        end

        def merged_function(function)
          key = [function.name, function.filename, function.start_line]
          (@functions[key] ||= Function.new(id: @functions.size + 1, name: function.name, filename: function.filename,
                                            start_line: function.start_line)).id
        end
      end
    end
  end
end
