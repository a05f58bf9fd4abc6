# frozen_string_literal: true

require_relative "errors"

module Sonde
  # Validates the options of Sonde.start at the boundary, so that a mistake is
  # reported with the option's name, the bad value and what is accepted,
  # before anything native is touched.
  class Options
    DEFAULTS = { rate: 100, max_frames: 400, signals: true, overhead_target: 1.0, gc: true }.freeze
    RATE_RANGE = (1..5000).freeze
    MAX_FRAMES_RANGE = (1..10_000).freeze
    # Percent of wall time sampling may take; above 0, at most 20.
    OVERHEAD_TARGET_MAX = 20

    attr_reader :rate, :max_frames, :signals, :overhead_target, :gc

    def initialize(**options)
      unknown = options.keys - DEFAULTS.keys
      unless unknown.empty?
        raise Sonde::ArgumentError,
              "unknown option#{"s" if unknown.size > 1} #{unknown.map(&:inspect).join(", ")}; " \
              "accepted: #{DEFAULTS.keys.map(&:inspect).join(", ")}"
      end

      values = DEFAULTS.merge(options)
      @rate = self.class.integer_in(:rate, values[:rate], RATE_RANGE, "samples per second")
      @max_frames = self.class.integer_in(:max_frames, values[:max_frames], MAX_FRAMES_RANGE, "frames per stack")
      @signals = self.class.boolean(:signals, values[:signals])
      @overhead_target = self.class.percent(:overhead_target, values[:overhead_target], OVERHEAD_TARGET_MAX)
      @gc = self.class.boolean(:gc, values[:gc])
      freeze
    end

    def to_h
      { rate: rate, max_frames: max_frames, signals: signals, overhead_target: overhead_target, gc: gc }
    end

    # The arguments Sonde::Native.start takes, in its order.
    def native_arguments
      [rate, max_frames, signals, overhead_target.to_f, gc]
    end

    def self.percent(name, value, max)
      return value.to_f if value.is_a?(Numeric) && !value.is_a?(Complex) && value.positive? && value <= max

      raise Sonde::ArgumentError,
            "#{name} must be a number above 0 and at most #{max} (percent of wall time), got #{describe(value)}"
    end

    def self.integer_in(name, value, range, unit)
      return value if value.is_a?(Integer) && range.cover?(value)

      raise Sonde::ArgumentError,
            "#{name} must be an Integer from #{range.min} to #{range.max} (#{unit}), got #{describe(value)}"
    end

    def self.boolean(name, value)
      return value if [true, false].include?(value)

      raise Sonde::ArgumentError, "#{name} must be true or false, got #{describe(value)}"
    end

    def self.describe(value)
      "#{value.inspect} (#{value.class})"
    end
  end
end
