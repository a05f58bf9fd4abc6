# frozen_string_literal: true

# pf2 inside a benchmark child: its CPU time mode (its default; the other
# is wall), where each Ruby thread has a kernel timer on its own CPU clock
# and is sampled in the signal handler; interval 1000/rate ms (pf2 takes
# whole milliseconds). The profile is pf2's own raw dump, the Marshal'd
# result of Pf2.stop that `pf2 report` reads.
module SondeBench
  module ProfilerHook
    module Pf2Hook
      MILLISECONDS_PER_SECOND = 1000

      module_function

      def start(rate, _profile_out)
        raise ArgumentError, "pf2 takes whole milliseconds: #{rate} Hz cannot be asked for" unless
          MILLISECONDS_PER_SECOND % rate == 0

        require "pf2"
        Pf2.start(interval_ms: MILLISECONDS_PER_SECOND / rate, time_mode: :cpu)
      end

      def stop(profile_out)
        profile = Pf2.stop
        File.binwrite(profile_out, Marshal.dump(profile)) if profile_out
        { samples: profile.fetch(:collected_sample_count), dropped_samples: profile.fetch(:dropped_sample_count) }
      end
    end
  end
end
