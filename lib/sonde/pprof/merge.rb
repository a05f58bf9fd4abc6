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
    #   Pprof::Merge.call([worker1, worker2], names: ["w1.pprof", "w2.pprof"])
    module Merge
      # The profiles cannot be merged; the message names the file and why.
      class IncompatibleError < Sonde::Error; end

      module_function

      # names label the profiles in errors (file names); profiles has at least one.
      def call(profiles, names: profiles.each_index.map { |i| "profile #{i + 1}" })
        raise ::ArgumentError, "no profile to merge" if profiles.empty?
        return profiles.first if profiles.size == 1

        check_compatible(profiles, names)
        Builder.new(profiles).call
      end

      def check_compatible(profiles, names)
        first = profiles.first
        profiles.each_with_index.drop(1).each do |profile, i|
          next if profile.sample_types == first.sample_types

          raise IncompatibleError,
                "#{names[i]}: its sample types (#{describe(profile.sample_types)}) differ from " \
                "#{names[0]}'s (#{describe(first.sample_types)}); only profiles of the same sample types merge"
        end
      end

      def describe(sample_types)
        sample_types.map { |type, unit| "#{type}/#{unit}" }.join(", ")
      end

      # Re-numbers functions and locations by their fields across the inputs.
      class Builder
        def initialize(profiles)
          @profiles = profiles
          @functions = {} # [name, filename, start_line] => Function
          @locations = {} # [function id, line] => Location
          @samples = {}   # [location ids, labels] => Sample
        end

        def call
          @profiles.each { |profile| add_samples(profile) }
          first = @profiles.first
          Profile.new(
            sample_types: first.sample_types,
            samples: @samples.values,
            locations: @locations.values.to_h { |location| [location.id, location] },
            functions: @functions.values.to_h { |function| [function.id, function] },
            time_nanos: @profiles.map(&:time_nanos).reject(&:zero?).min || 0,
            duration_nanos: @profiles.sum(&:duration_nanos),
            end_nanos: @profiles.map(&:end_nanos).max,
            period_type: first.period_type,
            period: @profiles.map(&:period).max,
            comments: @profiles.flat_map(&:comments).uniq,
            default_sample_type: @profiles.map(&:default_sample_type).find { |type| type && !type.empty? }
          )
        end

        private

        def add_samples(profile)
          location_ids = {} # this profile's location id => merged id
          profile.samples.each do |sample|
            stack = sample.location_ids.map { |id| location_ids[id] ||= merged_location(profile, id) }
            key = [stack, sample.labels.sort]
            merged = @samples[key]
            if merged
              merged.values = merged.values.zip(sample.values).map(&:sum)
            else
              @samples[key] = Sample.new(location_ids: stack, values: sample.values.dup, labels: sample.labels.dup)
            end
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
