# frozen_string_literal: true

require "sonde/profile_names"

module Sonde
  # How a profile's values read for a person, by their sample type's unit:
  # nanoseconds as durations ("15.2 ms"), bytes as sizes ("48.0 MB"), counts
  # and any other unit as whole numbers ("1,000,000"). The text report uses
  # it, and the flame graph page asks it which way to show each sample type
  # (page.js has the same rules in JavaScript, so both views agree).
  #
  #   Sonde::Quantities.format(15_240_000, "nanoseconds") # => "15.2 ms"
  #   Sonde::Quantities.format(50_331_648, "bytes")       # => "48.0 MB"
  module Quantities
    # Largest last; each unit is used while the value stays under the next one.
    DURATION_UNITS = [["ns", 1], ["µs", 1_000], ["ms", 1_000_000], ["s", 1_000_000_000]].freeze
    # Powers of 1024, as go tool pprof scales bytes; named as speedscope
    # names them, so a size reads the same in every viewer.
    BYTE_UNITS = [["B", 1], ["KB", 1 << 10], ["MB", 1 << 20], ["GB", 1 << 30], ["TB", 1 << 40]].freeze

    module_function

    # :duration, :bytes or :count: how values of unit are shown.
    def kind(unit)
      units = ProfileNames.all.fetch(:units)
      case unit
      when units.fetch(:nanoseconds) then :duration
      when units.fetch(:bytes) then :bytes
      else :count
      end
    end

    def format(value, unit)
      case kind(unit)
      when :duration then duration(value)
      when :bytes then bytes(value)
      else count(value)
      end
    end

    # "999 ns", "153 µs", "15.2 ms", "2.03 s": two or three significant digits.
    def duration(nanoseconds)
      scaled(nanoseconds, DURATION_UNITS)
    end

    # "512 B", "1.50 KB", "48.0 MB".
    def bytes(size)
      scaled(size, BYTE_UNITS)
    end

    # "1,000,000": object counts can be long.
    def count(number)
      number.round.to_s.gsub(/(\d)(?=(\d{3})+\z)/, "\\1,")
    end

    # The value in the largest unit that keeps it under the next one, as a
    # whole number in the first unit (no "999.00 ns").
    def scaled(value, units)
      units.each_with_index do |(name, factor), i|
        following = units[i + 1]
        text = i.zero? ? value.round.to_s : significant(value.to_f / factor)
        return "#{text} #{name}" if following.nil? || text.to_f.abs < following[1] / factor
      end
    end

    def significant(value)
      return Kernel.format("%.2f", value) if value.abs.round(2) < 10
      return Kernel.format("%.1f", value) if value.abs.round(1) < 100

      Kernel.format("%.0f", value)
    end
  end
end
