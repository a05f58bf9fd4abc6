# frozen_string_literal: true

# Accuracy: does each profiler put CPU time where it was spent? Two
# programs that measure their own truth (test/workloads) run under every
# profiler, on every Ruby, at RATE_HZ, settings.accuracy_repeats times,
# profiled from outside by the same hook as the overhead runs; each
# profile is read back in its own format (readers.rb) and counted:
#
# - straight_line: `crunch` is 41 lines of straight-line arithmetic ending
#   in a call to `trivial`, which does nothing. Counted: the self weight of
#   crunch and of trivial (samples whose leaf frame is that function);
#   crunch's share of the two (truth: nearly 1; a profiler that reads the
#   stack at the next safe point moves crunch's samples to trivial or to
#   crunch's last lines); and how crunch's self weight spreads over its 42
#   lines after the def: how many got any, and the share on the last two
#   (the call to trivial and the method's end, where a safe-point reader
#   stacks them).
# - bursty_threads: 3 threads each burn 3 ms of CPU in `burst`, then sleep
#   7 ms. Counted over the samples of those threads (stacks through
#   `bursty`, the method each thread runs, so no thread labels are needed):
#   the share of their weight with `burst` on the stack (inclusive) and with
#   `sleep` (Kernel#sleep) on the stack. Truth: the threads' own CPU clocks,
#   of which `burst` measured nearly all (the script prints both).
#
# The weight is what each profiler measures CPU in (readers.rb): CPU
# nanoseconds for Sonde and Datadog, samples for StackProf and pf2, samples
# of a running thread for Vernier.
require_relative "readers"
require_relative "summary"

module SondeBench
  class Accuracy
    RATE_HZ = 100
    SCRIPTS = %w[straight_line bursty_threads].freeze
    SCRIPT_DIR = File.expand_path("../../test/workloads", __dir__)
    # A method's name as each profiler writes it: `crunch`, `Object#crunch`, `Kernel.sleep`.
    CRUNCH = /(\A|[#.])crunch\z/.freeze
    TRIVIAL = /(\A|[#.])trivial\z/.freeze
    BURSTY = /(\A|[#.])bursty\z/.freeze
    BURST = /(\A|[#.])burst\z/.freeze
    SLEEP = /(\A|[#.])sleep\z/.freeze
    # Each script's own default length (seconds), used unless settings say otherwise.
    DEFAULT_SECONDS = { "straight_line" => 2.0, "bursty_threads" => 3.0 }.freeze

    # One run's numbers. straight_line: crunch_share, lines_hit, body_lines,
    # last_line_share; bursty_threads: burst_share, sleep_share,
    # truth_burst_share, thread_weight. unit: what the weights count.
    Run = Struct.new(:script, :series, :profiler, :unit, :numbers, keyword_init: true)

    attr_reader :lineup

    def initialize(child, settings, log, lineup, dir)
      @child = child
      @settings = settings
      @log = log
      @lineup = lineup
      @dir = dir
      @runs = Hash.new { |hash, key| hash[key] = [] }
    end

    def measure
      @settings.accuracy_repeats.times do |repeat|
        @lineup.rubies.each do |ruby|
          @lineup.profilers(ruby.series).each do |profiler|
            SCRIPTS.each { |script| @runs[[script, ruby.series, profiler]] << run(script, ruby, profiler) }
          end
        end
        @log.call("accuracy: repeat #{repeat + 1}/#{@settings.accuracy_repeats} done")
      end
      self
    end

    def runs(script, series, profiler)
      @runs[[script, series, profiler]]
    end

    # Summary of one number over the repeats.
    def summary(script, series, profiler, number)
      Summary.of(runs(script, series, profiler).map { |run| run.numbers[number] })
    end

    def repeats
      @settings.accuracy_repeats
    end

    def seconds(script)
      @settings.accuracy_seconds || DEFAULT_SECONDS.fetch(script)
    end

    private

    def run(script, ruby, profiler)
      out = File.join(@dir, "accuracy-#{script}-#{ruby.series}-#{profiler}.#{Readers.extension(profiler)}")
      args = [File::NULL, seconds(script).to_s, RATE_HZ.to_s, "none"]
      facts, _hook = @child.run_script(File.join(SCRIPT_DIR, "#{script}.rb"), args, profiler: profiler, rate: RATE_HZ,
                                                                               ruby: ruby, timeout_s: seconds(script),
                                                                               profile_out: out)
      raise Child::Failure, "#{script} (Ruby #{ruby.series}, #{profiler}): no profile was written" unless File.exist?(out)

      view = Readers.read(profiler, out)
      numbers = script == "straight_line" ? straight_line(view, facts) : bursty_threads(view, facts)
      Run.new(script: script, series: ruby.series, profiler: profiler, unit: view.unit, numbers: numbers)
    ensure
      Dir["#{out}*"].each { |path| File.delete(path) } if out
    end

    def straight_line(view, facts)
      crunch = self_weight(view, CRUNCH)
      trivial = self_weight(view, TRIVIAL)
      call_line = facts.fetch("crunch_call_line")
      end_line = facts.fetch("crunch_end_line")
      body = ((facts.fetch("crunch_first_line") + 1)..end_line)
      lines = view.self_lines(CRUNCH).select { |line, _| body.cover?(line) }
      in_body = lines.values.sum
      { crunch_self: crunch, trivial_self: trivial, crunch_share: ratio(crunch, crunch + trivial),
        lines_hit: lines.count { |_, weight| weight.positive? }, body_lines: body.size,
        last_line_share: ratio(lines.fetch(call_line, 0) + lines.fetch(end_line, 0), in_body) }
    end

    def bursty_threads(view, facts)
      threads = view.samples.select { |sample| on_stack?(sample, BURSTY) }
      total = threads.sum(&:weight)
      truth = facts.fetch("threads").values
      { thread_weight: total, burst_share: ratio(threads.select { |s| on_stack?(s, BURST) }.sum(&:weight), total),
        sleep_share: ratio(threads.select { |s| on_stack?(s, SLEEP) }.sum(&:weight), total),
        truth_burst_share: ratio(truth.sum { |t| t.fetch("burst_cpu") }, truth.sum { |t| t.fetch("cpu") }) }
    end

    def self_weight(view, pattern)
      view.samples.sum { |sample| sample.frames.first&.first&.match?(pattern) ? sample.weight : 0 }
    end

    def on_stack?(sample, pattern)
      sample.frames.any? { |name, _line| name&.match?(pattern) }
    end

    def ratio(part, whole)
      whole.positive? ? part.fdiv(whole) : nil
    end
  end
end
