# frozen_string_literal: true

# The report's "Profilers compared" section: on each Ruby, which profilers
# ran (with versions) and which could not and why, and the options each was
# run with (the hooks in profiler_hook.rb and hooks/ set exactly these).
require_relative "peers"

module SondeBench
  class PeerNotes
    OPTIONS = {
      "sonde" => "`Sonde.start(rate:)`: CPU and wall time of every thread, its defaults otherwise " \
                 "(GC accounting on, 1% overhead target).",
      "stackprof-cpu" => "`StackProf.start(mode: :cpu, interval: 1_000_000/rate µs, raw: true)`: a process-wide " \
                         "`ITIMER_PROF`, one stack (the thread that runs the postponed job) per tick.",
      "stackprof-wall" => "`StackProf.start(mode: :wall, interval: 1_000_000/rate µs, raw: true)`: `ITIMER_REAL`, " \
                          "otherwise as cpu mode.",
      "datadog" => "`Datadog.configure`: `profiling.enabled = true`; CPU and wall time of every thread (its only " \
                   "mode); `profiling.advanced.experimental_cpu_sampling_interval_ms = 1000/rate` (1..10 ms, so " \
                   "100 and 1000 Hz); `profiling.allocation_enabled = false`, " \
                   "`profiling.advanced.experimental_heap_enabled = false` (the defaults, set anyway); GC " \
                   "profiling, GVL profiling (3.2+), sampling from the signal handler (default on 3.2.5+/3.3.4+, " \
                   "so on 3.3.8 but not 3.1.2) and its 2% overhead target left at their defaults; " \
                   "`code_provenance_enabled`, tracing, telemetry, remote configuration, crash tracking and " \
                   "startup logs off. No agent: `profiling.exporter.transport` (a documented setting) is an " \
                   "object whose `export(flush)` writes the flushed pprof (`flush.encoded_profile`, " \
                   "zstd-compressed) to a file. `Datadog::Profiling.wait_until_running` before the workload; " \
                   "`Datadog.shutdown!` at exit flushes the last profile (Datadog drops profiles under 1 s, so " \
                   "the short overhead runs write none; their sample counts come from the worker's stats).",
      "vernier" => "`Vernier.start_profile(mode: :wall, interval: 1_000_000/rate µs, allocation_interval: 0)`: " \
                   "wall time only (its one time mode), every thread, each sample tagged running, stalled on the " \
                   "GVL or idle; `Vernier.stop_profile`, written as Firefox-profiler JSON.",
      "pf2" => "`Pf2.start(interval_ms: 1000/rate, time_mode: :cpu)`: a timer on each thread's own CPU clock, " \
               "stacks read in the signal handler (its default mode; the other is wall); `Pf2.stop`, written as " \
               "its Marshal'd raw profile."
    }.freeze

    def initialize(rubies, lineup)
      @rubies = rubies
      @lineup = lineup
    end

    def to_markdown
      <<~MD
        ## Profilers compared

        The peers are installed by `rake bench:peers` (`bench/support/install_peers.rb`), pinned, into
        `tmp/peers/ruby-<version>` (never the system's gems), and loaded with `GEM_HOME` and
        `GEM_PATH` set to that folder only. All run at the same rates as Sonde, 100 and 1000 Hz.

        | Ruby | profiler | version | options |
        |---|---|---|---|
        #{rows.join("\n")}
      MD
    end

    private

    def rows
      @rubies.flat_map do |ruby|
        next ["| #{ruby.series} | (all) | | not available: #{ruby.reason} |"] unless ruby.available?

        ran = @lineup.profilers(ruby.series).map do |profiler|
          "| #{ruby.series} | #{profiler} | #{version(ruby.series, profiler)} | #{OPTIONS.fetch(profiler)} |"
        end
        ran + @lineup.unavailable[ruby.series].map do |profiler, reason|
          "| #{ruby.series} | #{profiler} | | not available: #{reason} |"
        end
      end
    end

    def version(series, profiler)
      return @lineup.version(series, profiler) if Peers::ALL.any? { |peer| peer.name == profiler }

      profiler == "sonde" ? "this tree" : "Debian's ruby-stackprof"
    end
  end
end
