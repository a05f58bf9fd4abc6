# frozen_string_literal: true

# pprof profiles (Sonde's gzip'd, Datadog's zstd-compressed) through
# Sonde's own decoder. The weight is the `cpu-time` value (nanoseconds):
# both profilers charge each thread's CPU time since its previous sample to
# the stack it has at the sample. Datadog writes one file per flush (path,
# path.2, ... on runs longer than its upload period): all are read.
require "open3"

module SondeBench
  module Readers
    module PprofReader
      ZSTD_MAGIC = "\x28\xb5\x2f\xfd".b.freeze
      CPU_TIME = "cpu-time"

      module_function

      def read(path)
        require_sonde_decoder
        files = [path, *Dir["#{path}.*"].select { |p| p.match?(/\.\d+\z/) }.sort_by { |p| p[/\d+\z/].to_i }]
        samples = files.flat_map { |file| samples_of(Sonde::Pprof.decode(decompress(File.binread(file)))) }
        View.new(samples, "cpu-time ns")
      end

      def samples_of(profile)
        column = profile.value_index(CPU_TIME) or raise ArgumentError, "the profile has no #{CPU_TIME} values"
        profile.samples.map do |sample|
          Sample.new(profile.frames(sample).map { |function, line| [function.name, line] }, sample.values[column])
        end
      end

      # Ruby has no zstd: the zstd command (Debian's zstd package) inflates.
      def decompress(bytes)
        return bytes unless bytes.start_with?(ZSTD_MAGIC)

        out, err, status = Open3.capture3("zstd", "-dc", stdin_data: bytes, binmode: true)
        raise ArgumentError, "zstd -dc failed: #{err.strip}" unless status.success?

        out
      rescue Errno::ENOENT
        raise ArgumentError, "Datadog's profile is zstd-compressed and the zstd command is not installed"
      end

      # The decoder requires its siblings by their load path names.
      def require_sonde_decoder
        lib = File.expand_path("../../../lib", __dir__)
        $LOAD_PATH.unshift(lib) unless $LOAD_PATH.include?(lib)
        require "sonde/pprof"
      end
    end
  end
end
