# frozen_string_literal: true

require "sonde/errors"

# Loaded by sonde/pprof, which defines LimitError (a DecodeError).

module Sonde
  module Pprof
    # How much a profile may hold before Sonde refuses to read it, so that a
    # file of kilobytes cannot take gigabytes: every count that multiplies
    # memory has a cap, each raised with its SONDE_READ_MAX_* variable. Read
    # once per decode. The pure-Ruby decoder holds about 200 bytes per
    # sample and 260 per location, so the defaults (1M samples) stay near
    # a few hundred MB; a bigger profile needs the variable.
    #
    # Gzip is the multiplier a bomb uses (deflate reaches 1000:1; a pprof
    # inflates 3-10 times), so the inflated size is capped at
    # INFLATE_ALLOWANCE_BYTES plus inflate_ratio times the compressed size:
    # a 16 KB gzip of one repeated sample fails while it inflates, before
    # any decoding, and a small profile with one huge repetitive name (a
    # generated 1 MB method name) still reads.
    class Limits
      # name => [variable, default, what it counts]
      CAPS = {
        samples: ["SONDE_READ_MAX_SAMPLES", 1_000_000, "samples"],
        locations: ["SONDE_READ_MAX_LOCATIONS", 1_000_000, "locations"],
        functions: ["SONDE_READ_MAX_FUNCTIONS", 1_000_000, "functions"],
        strings: ["SONDE_READ_MAX_STRINGS", 2_000_000, "strings (string table entries and comments)"],
        frames: ["SONDE_READ_MAX_FRAMES", 20_000_000, "stack frames (location ids of all samples)"],
        labels: ["SONDE_READ_MAX_LABELS", 10_000_000, "labels (of all samples)"],
        values: ["SONDE_READ_MAX_VALUES", 10_000_000, "values (of all samples)"],
        inflate_ratio: ["SONDE_READ_MAX_INFLATE_RATIO", 100, "times its compressed size, inflated"],
      }.freeze
      # Inflated bytes allowed whatever the ratio. Sonde's own profiles can
      # inflate far past 100 times: a 15.6 KB allocation profile of 100,094
      # samples (alloc_interval 1) inflates 282 times, to 4.4 MB. The 16 KB
      # and 65 KB bombs of the tests inflate 685 times, past this plus 100
      # times their size.
      INFLATE_ALLOWANCE_BYTES = 8 << 20

      def self.from_env(env = ENV)
        new(CAPS.to_h { |name, (variable, default, _)| [name, parse(variable, env.fetch(variable, nil), default)] })
      end

      def self.parse(variable, text, default)
        return default if text.nil? || text.strip.empty?
        return Integer(text.strip, 10) if text.strip.match?(/\A[1-9]\d*\z/)

        raise Sonde::ArgumentError, "#{variable}=#{text.inspect} is not accepted: expected a positive integer"
      end

      def initialize(caps)
        @caps = caps
        @counts = Hash.new(0)
      end

      def [](name)
        @caps.fetch(name)
      end

      # Adds n to the count of name; LimitError once it is over its cap.
      def count(name, n = 1)
        total = (@counts[name] += n)
        refuse(name) if total > @caps.fetch(name)
      end

      # inflated: bytes out of the gzip so far; compressed: the gzip's size.
      def check_inflated(inflated, compressed)
        ratio = @caps.fetch(:inflate_ratio)
        return if inflated <= INFLATE_ALLOWANCE_BYTES + (compressed * ratio)

        variable, = CAPS.fetch(:inflate_ratio)
        raise LimitError, "gzip data inflates more than #{ratio} times its #{compressed} bytes " \
                          "(past #{INFLATE_ALLOWANCE_BYTES >> 20} MiB; a pprof inflates 3-300 times, a gzip bomb " \
                          "up to 1000); raise the cap with #{variable}=N"
      end

      private

      def refuse(name)
        variable, _default, what = CAPS.fetch(name)
        raise LimitError, "profile too large: more than #{@caps.fetch(name)} #{what}; raise the cap with #{variable}=N"
      end
    end
  end
end
