# frozen_string_literal: true

# Datadog's profiler (the `datadog` gem) inside a benchmark child, without
# an agent: its documented `profiling.exporter.transport` setting takes any
# object that answers `export(flush)`, so FileTransport writes each profile
# it flushes to a file instead of uploading it. The profile is a pprof,
# zstd-compressed (libdatadog compresses it; profile_readers/pprof.rb reads it).
#
# Configured like Sonde: CPU and wall time together (Datadog's only mode),
# every thread, CPU sampling interval 1000/rate ms (its
# `experimental_cpu_sampling_interval_ms`, 1..10, so 100 to 1000 Hz);
# allocation and heap profiling off (their defaults, set anyway); GC
# profiling and its own overhead target (2%) at their defaults; everything
# else the gem would start beside the profiler (tracing, telemetry, remote
# configuration, crash tracking, startup logs, code provenance) off.
module SondeBench
  module ProfilerHook
    module DatadogHook
      MILLISECONDS_PER_SECOND = 1000
      INTERVAL_RANGE_MS = (1..10).freeze

      # Each flush's pprof to a file: the first to path, later ones (a run
      # longer than the 60 s upload period) to path.2, path.3, ...
      class FileTransport
        attr_reader :exports

        def initialize(path)
          @path = path
          @exports = 0
        end

        def export(flush)
          @exports += 1
          return true unless @path

          File.binwrite(@exports == 1 ? @path : "#{@path}.#{@exports}", flush.encoded_profile._native_bytes)
          true
        end
      end

      module_function

      def start(rate, profile_out)
        interval_ms = MILLISECONDS_PER_SECOND / rate
        unless INTERVAL_RANGE_MS.cover?(interval_ms) && MILLISECONDS_PER_SECOND % rate == 0
          raise ArgumentError, "datadog samples every 1..10 ms: #{rate} Hz cannot be asked for"
        end

        require "datadog"
        @transport = FileTransport.new(profile_out)
        Datadog.configure { |c| configure(c, interval_ms) }
        # The worker starts its sampling thread asynchronously: wait for it,
        # so the workload is profiled from its first line.
        Datadog::Profiling.wait_until_running
      end

      def configure(c, interval_ms)
        c.profiling.enabled = true
        c.profiling.exporter.transport = @transport
        c.profiling.allocation_enabled = false
        c.profiling.advanced.experimental_heap_enabled = false
        c.profiling.advanced.experimental_cpu_sampling_interval_ms = interval_ms
        c.profiling.advanced.code_provenance_enabled = false
        c.tracing.enabled = false
        c.telemetry.enabled = false
        c.remote.enabled = false
        c.crashtracking.enabled = false
        c.diagnostics.startup_logs.enabled = false
      end

      # Stats are read before the shutdown, which flushes the last profile
      # (only when it covers at least a second: Datadog skips shorter ones).
      def stop(_profile_out)
        worker = Datadog.send(:components).profiler.send(:worker)
        stats = worker.stats
        Datadog.shutdown!
        { samples: stats.fetch(:sample_count), cpu_samples: stats.fetch(:cpu_sampled),
          sampling_time_ns_total: stats.fetch(:cpu_sampling_time_ns_total), profiles_written: @transport.exports,
          sighandler_sampling: Datadog.configuration.profiling.advanced.sighandler_sampling_enabled }
      end
    end
  end
end
