# frozen_string_literal: true

# Reads the profile each profiler wrote (in its own format) into one shape
# the accuracy measurement can count: samples with their stack (function
# name and line, leaf first) and a CPU weight, in the unit the profiler
# measures CPU in. One reader per format, in readers/:
#
#   sonde, datadog               pprof (Datadog's zstd-compressed), via lib/sonde/pprof.rb; weight: cpu-time ns
#   stackprof-cpu, -wall         StackProf's Marshal'd results (raw: true); weight: samples
#   vernier                      Firefox-profiler JSON; weight: samples of a running thread
#   pf2                          pf2's Marshal'd Pf2.stop result; weight: samples (each one CPU interval)
#
# Runs in the benchmark runner (this machine's Ruby), whichever Ruby wrote
# the profile: every format here is plain data (protobuf, Marshal of
# Hashes/Arrays/Strings/Symbols/Integers, JSON).
require_relative "readers/pprof"
require_relative "readers/stackprof"
require_relative "readers/vernier"
require_relative "readers/pf2"

module SondeBench
  module Readers
    # frames: [[function name, line], ...] leaf first; weight: Numeric.
    Sample = Struct.new(:frames, :weight)

    # What a reader returns: the samples, the unit of their weight, and the
    # self weight by line of the functions whose name matches (for
    # StackProf, whose raw samples carry no lines, from its per-line counts).
    class View
      attr_reader :samples, :unit

      def initialize(samples, unit, self_lines: nil)
        @samples = samples
        @unit = unit
        @self_lines = self_lines
      end

      # { line => self weight } of the functions whose name matches pattern.
      def self_lines(pattern)
        return @self_lines.call(pattern) if @self_lines

        lines = Hash.new(0)
        @samples.each do |sample|
          name, line = sample.frames.first
          lines[line] += sample.weight if name&.match?(pattern)
        end
        lines
      end
    end

    # The file extension each profiler's profile gets, and its reader.
    FORMATS = {
      "sonde" => ["pprof", -> (path) { PprofReader.read(path) }],
      "datadog" => ["pprof.zst", -> (path) { PprofReader.read(path) }],
      "stackprof-cpu" => ["stackprof", -> (path) { StackProfReader.read(path) }],
      "stackprof-wall" => ["stackprof", -> (path) { StackProfReader.read(path) }],
      "vernier" => ["vernier.json", -> (path) { VernierReader.read(path) }],
      "pf2" => ["pf2prof", -> (path) { Pf2Reader.read(path) }]
    }.freeze

    module_function

    def extension(profiler)
      FORMATS.fetch(profiler).first
    end

    def read(profiler, path)
      FORMATS.fetch(profiler).last.call(path)
    end
  end
end
