# frozen_string_literal: true

# Vernier inside a benchmark child: its wall mode (its only time mode),
# which samples every thread each interval and tags each sample with the
# thread's state (running, stalled waiting for the GVL, idle); interval
# 1_000_000/rate µs; allocation sampling off (allocation_interval 0, its
# default) unless SONDE_BENCH_ALLOC_INTERVAL asks for one allocation in N
# (Vernier counts allocations and records every Nth, with its stack). The
# profile is written in Vernier's default format, the Firefox profiler's
# JSON (Vernier::Result#write).
module SondeBench
  module ProfilerHook
    module VernierHook
      MICROSECONDS_PER_SECOND = 1_000_000

      module_function

      def start(rate, _profile_out)
        require "vernier"
        Vernier.start_profile(mode: :wall, interval: MICROSECONDS_PER_SECOND / rate,
                              allocation_interval: ProfilerHook.alloc_interval || 0)
      end

      def stop(profile_out)
        result = Vernier.stop_profile
        result.write(out: profile_out) if profile_out
        { samples: result.total_samples, threads: result.threads.size,
          allocation_samples: result.threads.values.sum { |thread| thread.dig(:allocations, :samples)&.size || 0 } }
      end
    end
  end
end
