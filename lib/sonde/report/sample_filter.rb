# frozen_string_literal: true

module Sonde
  class Report
    # --focus and --ignore, as pprof means them: focus keeps the samples whose
    # stack goes through a matching function, ignore drops those that do.
    # A function matches when the regexp matches its name or its file, so
    # `--ignore /gems/` drops every sample that passes through a gem.
    class SampleFilter
      def initialize(frames, focus:, ignore:)
        @frames = frames
        @focus = focus && matching_groups(focus)
        @ignore = ignore && matching_groups(ignore)
      end

      def select(samples)
        return samples unless @focus || @ignore

        samples.select do |sample|
          _, groups = @frames.stack(sample.location_ids)
          (@focus.nil? || groups.any? { |group| @focus[group] }) &&
            (@ignore.nil? || groups.none? { |group| @ignore[group] })
        end
      end

      private

      # One boolean per group, computed once: samples share their functions.
      def matching_groups(regexp)
        @frames.groups.map { |group| regexp.match?(group.name) || regexp.match?(group.filename) }
      end
    end
  end
end
