# frozen_string_literal: true

require "json"
require "sonde/version"
require "sonde/views"

module Sonde
  module Converters
    # speedscope's own file format (https://www.speedscope.app/file-format-schema.json).
    # A pprof profile holds stacks with summed values, not a timeline, so each
    # profile is "sampled": one weighted sample per distinct stack, frames
    # root first. There is one profile per thread and sample type (by
    # default those of Sonde's views the profile has: cpu-time, wall-time,
    # alloc-samples, heap-live-size), busiest thread first; speedscope lists
    # them in its profile picker.
    class Speedscope
      SCHEMA = "https://www.speedscope.app/file-format-schema.json"
      # pprof units that speedscope has too (its schema's ValueUnit); every
      # other one, "count" among them, is its "none": plain numbers.
      UNITS = { "nanoseconds" => "nanoseconds", "microseconds" => "microseconds",
                "milliseconds" => "milliseconds", "seconds" => "seconds", "bytes" => "bytes" }.freeze

      # type_indexes: the sample types to export, or nil for the default ones.
      def initialize(stacks, name:, type_indexes: nil)
        @stacks = stacks
        @name = name
        @type_indexes = type_indexes || default_type_indexes
      end

      def write(io)
        io << JSON.generate(to_h) << "\n"
        io
      end

      def to_h
        {
          "$schema" => SCHEMA,
          "name" => @name,
          "exporter" => "sonde #{Sonde::VERSION}",
          "activeProfileIndex" => 0,
          "shared" => { "frames" => frames },
          "profiles" => @type_indexes.flat_map { |type_index| profiles(type_index) }
        }
      end

      private

      def default_type_indexes
        indexes = Views.present(@stacks).map { |view| @stacks.type_index(view.type) }
        indexes.empty? ? @stacks.sample_types.each_index.to_a : indexes
      end

      def frames
        @stacks.functions.map do |function|
          frame = { "name" => function.name.empty? ? "?" : function.name }
          frame["file"] = function.filename unless function.filename.empty?
          frame["line"] = function.start_line if function.start_line.positive?
          frame
        end
      end

      def profiles(type_index)
        type, unit = @stacks.sample_types[type_index]
        by_thread = Hash.new { |hash, thread| hash[thread] = Hash.new(0) }
        @stacks.rows.each do |row|
          value = row.values[type_index]
          by_thread[row.thread][row.frames] += value unless value.zero?
        end
        by_thread.sort_by { |thread, weights| [-weights.values.sum, thread] }.map do |thread, weights|
          sampled_profile("#{@stacks.threads[thread].label} (#{type})", UNITS.fetch(unit, "none"), weights)
        end
      end

      def sampled_profile(name, unit, weights)
        {
          "type" => "sampled", "name" => name, "unit" => unit,
          "startValue" => 0, "endValue" => weights.values.sum,
          "samples" => weights.keys, "weights" => weights.values
        }
      end
    end
  end
end
