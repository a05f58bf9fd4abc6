# frozen_string_literal: true

# The report's "Accuracy" section, from Accuracy (accuracy.rb): per Ruby and
# profiler, medians (min–max) over the repeats of the numbers each run gave.
require_relative "accuracy"

module SondeBench
  class AccuracyReport
    def initialize(accuracy)
      @accuracy = accuracy
    end

    def to_markdown
      <<~MD
        ## Accuracy

        Two programs that measure their own truth (`test/workloads/straight_line.rb`,
        `test/workloads/bursty_threads.rb`), each run under every profiler above on every Ruby at
        #{Accuracy::RATE_HZ} Hz, #{repeats} time(s), profiled from outside by the same hook and options as
        the overhead runs. Each profile is read back in its own format (`bench/support/readers/`):
        Sonde's and Datadog's pprof through `lib/sonde/pprof.rb` (Datadog's after `zstd -d`), weight
        `cpu-time` nanoseconds; StackProf's Marshal'd results through `StackProf::Report`, weight
        samples; Vernier's Firefox-profiler JSON, weight samples whose stack is not in its "Idle" or
        "Stalled" category (a running thread; Vernier has no CPU clock); pf2's Marshal'd raw
        profile, weight samples (each one interval of a thread's own CPU clock). A function is
        matched by its method name however the profiler writes it (`crunch`, `Object#crunch`,
        `Kernel.sleep`). Medians (min–max) over the runs.

        **straight_line** (#{seconds("straight_line")} s): `crunch` is 41 lines of straight-line integer arithmetic that
        ends by calling `trivial`, which does nothing, so nearly all CPU is crunch's own. "crunch
        share": crunch's self weight (samples whose leaf frame is crunch) over crunch's plus
        trivial's; a profiler that reads the stack at the next safe point gets the call to
        `trivial` instead, near 0. "lines with samples": how many of crunch's 42 lines after its
        def got any of its self weight (spread over the method, or stacked on one line); "on the
        last lines": the share of crunch's self weight on its last two lines, the call to
        `trivial` and the method's `end` (a spread profile gives them about 2/42 = 5%).
        StackProf's lines come from its per-line self counts (its raw stacks have no lines).

        | Ruby | profiler | weight | crunch share | lines with samples (of 42) | on the last lines |
        |---|---|---|---|---|---|
        #{straight_line_rows.join("\n")}

        **bursty_threads** (#{seconds("bursty_threads")} s): 3 threads each loop burning 3 ms of their own CPU in `burst`,
        then sleeping 7 ms. Over the samples of those threads (stacks through `bursty`, the method
        each thread runs; no thread labels needed, so it works for StackProf too), the share of
        their weight with `burst` on the stack (inclusive) and with `sleep` (Kernel#sleep) on the
        stack. "truth": the threads' own CPU clocks, of which `burst` measured this share itself
        (the script prints both); it is the right answer for "under burst", and 0 for "under
        sleep". A profiler that charges a thread's CPU time since its previous sample to the
        stack it has at the sample (mostly asleep) puts most of it under sleep.

        | Ruby | profiler | weight | under burst | under Kernel#sleep | truth (burst) |
        |---|---|---|---|---|---|
        #{bursty_rows.join("\n")}
      MD
    end

    private

    def repeats
      @accuracy.repeats
    end

    def seconds(script)
      @accuracy.seconds(script)
    end

    def each_cell(script)
      @accuracy.lineup.rubies.flat_map do |ruby|
        @accuracy.lineup.profilers(ruby.series).map do |profiler|
          runs = @accuracy.runs(script, ruby.series, profiler)
          yield ruby.series, profiler, runs.first&.unit, ->(number) { @accuracy.summary(script, ruby.series, profiler, number) }
        end
      end
    end

    def straight_line_rows
      each_cell("straight_line") do |series, profiler, unit, of|
        "| #{series} | #{profiler} | #{unit} | #{share(of.call(:crunch_share))} | " \
          "#{count(of.call(:lines_hit))} | #{share(of.call(:last_line_share))} |"
      end
    end

    def bursty_rows
      each_cell("bursty_threads") do |series, profiler, unit, of|
        "| #{series} | #{profiler} | #{unit} | #{share(of.call(:burst_share))} | #{share(of.call(:sleep_share))} | " \
          "#{share(of.call(:truth_burst_share))} |"
      end
    end

    # nil: the profile had no weight to divide (no samples of those threads
    # for "under burst", no self weight of crunch for "on the last line").
    def share(summary)
      summary ? summary.to_s { |v| format("%.1f%%", v * 100) } : "– (nothing sampled)"
    end

    def count(summary)
      summary ? summary.to_s(&:to_i) : "–"
    end
  end
end
