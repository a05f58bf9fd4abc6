# frozen_string_literal: true

# The report of bench/alloc_cost.rb (bench/ALLOC_RESULTS.md): first one
# table of overheads (every variant against every workload and Ruby), then,
# per workload and Ruby, the process CPU times behind them and how many
# allocation samples each profiler took. Overheads are given two ways,
# the ratio of the medians and the median of the per-round ratios (each run
# over the unprofiled run of its own round): the same machine noise reaches
# both sides of a pair, so the paired figure is the steadier; "none (A/A)"
# shows how far two unprofiled runs stray from each other on this machine.
require "etc"
require_relative "child"
require_relative "summary"

module SondeBench
  class AllocReport
    NO_VALUE = "–"
    # Of a failure's message (child.rb's), the report keeps its first line
    # (the run and its exit status) and, for a crash, Ruby's [BUG] line and
    # where in Sonde's C code: the source line when the build has debug
    # lines, else the function.
    SONDE_FRAME = [%r{ext/sonde/\S+:\d+}, /\.so\((\w+)/].freeze
    # Left out so that the same crash in several runs reads as one line.
    RUN_SPECIFIC = [/pid \d+ /, / at 0x\h+/].freeze

    def initialize(result)
      @result = result
    end

    def to_markdown
      <<~MD
        # Allocation profiling: what it costs

        Written by `#{@result.command}` (bench/alloc_cost.rb) on #{@result.finished.utc.strftime("%Y-%m-%d %H:%M UTC")}, in
        #{((@result.finished - @result.started) / 60).round(1)} minutes; Sonde at commit #{@result.commit}. Rounds: #{@result.rounds}
        (`rake bench:alloc ROUNDS=N`), work scale #{@result.scale} (SONDE_BENCH_WORK_SCALE), shuffle seed #{@result.seed};
        #{Etc.nprocessors} CPUs, shared with other work: read the A/A row before any other.

        #{rubies}

        Each round runs every variant once per workload and Ruby, in a shuffled order, each in a process of its own;
        the time is the process CPU time (user + sys, every thread, the profiler's own included) of the workload's
        body, start-up and the profiler's stop left out. Time sampling, where a variant does it, is at #{@result.rate_hz} Hz.
        Sonde's allocation intervals are averages (random gaps); StackProf's and Vernier's are exact counts (every
        Nth allocation). StackProf object mode samples allocations only; "sonde" and "vernier" sample time only.

        ## Overhead, paired median (process CPU vs the unprofiled run of the same round)

        #{overview}

        #{cells}
        #{unavailable}#{failures}
      MD
    end

    private

    def rubies
      @result.rubies.map { |ruby| "- #{ruby.name}: #{ruby.description}" }.join("\n")
    end

    def keys
      @result.workloads.product(@result.rubies.map(&:series))
    end

    def overview
      columns = keys.map { |workload, series| "#{workload}, #{series}" }
      names = @result.variants.values.flatten.map(&:name).uniq - [@result.baseline]
      rows = names.map do |name|
        overheads = keys.map do |workload, series|
          pairs = paired(workload, series, name)
          pairs ? percent(pairs.median) : NO_VALUE
        end
        "| #{name} | #{overheads.join(" | ")} |"
      end
      ["| variant | #{columns.join(" | ")} |", "|---|#{"---|" * columns.size}", *rows].join("\n")
    end

    def cells
      keys.map { |workload, series| cell(workload, series) }.join("\n")
    end

    def cell(workload, series)
      variants = @result.variants.fetch(series)
      seen = variants.filter_map { |variant| allocations_seen(workload, series, variant.name) }.first
      <<~MD
        ## #{workload}, Ruby #{series}

        #{seen ? "About #{seen.round(-3)} allocations per run while Sonde ran, start-up included " \
                 "(its allocations_sampled_over)." : ""}

        | variant | runs | CPU s, median (p25–p75) | vs none, medians | vs none, paired median (p25–p75) | wall s, median | allocation samples | samples dropped | live heap objects at stop |
        |---|---|---|---|---|---|---|---|---|
        #{variants.map { |variant| row(workload, series, variant) }.join("\n")}
      MD
    end

    def row(workload, series, variant)
      runs = runs(workload, series, variant.name)
      return "| #{variant.name} | 0 | #{([NO_VALUE] * 7).join(" | ")} |" if runs.empty?

      cpu = runs.map(&:cpu_s)
      base = runs(workload, series, @result.baseline).map(&:cpu_s)
      pairs = paired(workload, series, variant.name)
      [variant.name, runs.size,
       format("%.3f (%.3f–%.3f)", Summary.percentile(cpu, 0.5), Summary.percentile(cpu, 0.25), Summary.percentile(cpu, 0.75)),
       variant.name == @result.baseline ? NO_VALUE : percent(Summary.percentile(cpu, 0.5) / Summary.percentile(base, 0.5)),
       pairs ? "#{percent(pairs.median)} (#{percent(pairs.p25)}–#{percent(pairs.p75)})" : NO_VALUE,
       format("%.3f", Summary.percentile(runs.map(&:elapsed_s), 0.5)),
       *allocation_cells(variant, runs)].then { |cells| "| #{cells.join(" | ")} |" }
    end

    # Allocation samples taken, dropped (Sonde's, when its capture slots
    # were full), and live at the stop (heap: true); dashes for what a
    # variant does not do or does not say.
    def allocation_cells(variant, runs)
      return [NO_VALUE] * 3 unless variant.samples_allocations?

      [median_of(runs) { |run| allocation_samples(run) },
       median_of(runs) { |run| sonde_stat(run, "alloc_dropped_samples") },
       median_of(runs) { |run| variant.heap ? sonde_stat(run, "heap_samples") : nil }]
    end

    Paired = Struct.new(:median, :p25, :p75)

    # Each run over the unprofiled run of its round; nil for the baseline.
    def paired(workload, series, name)
      return nil if name == @result.baseline

      base = @result.runs[[workload, series, @result.baseline]]
      ratios = @result.runs[[workload, series, name]].each_with_index.filter_map do |run, round|
        run && base[round] && run.cpu_s / base[round].cpu_s
      end
      return nil if ratios.empty?

      Paired.new(*[0.5, 0.25, 0.75].map { |fraction| Summary.percentile(ratios, fraction) })
    end

    def runs(workload, series, name)
      @result.runs[[workload, series, name]].compact
    end

    # What each profiler says it sampled: Sonde's stats, StackProf's sample
    # count (object mode samples nothing else), Vernier's allocation list.
    def allocation_samples(run)
      case run.profiler
      when "sonde" then sonde_stat(run, "alloc_samples")
      when "stackprof-object" then run.hook["samples"]
      when "vernier" then run.hook["allocation_samples"]
      end
    end

    def sonde_stat(run, key)
      run.profiler == "sonde" ? run.hook.fetch("stats")[key] : nil
    end

    def allocations_seen(workload, series, name)
      counts = runs(workload, series, name).filter_map { |run| sonde_stat(run, "allocations_sampled_over") }
      counts.select!(&:positive?)
      counts.empty? ? nil : Summary.percentile(counts, 0.5)
    end

    # The median of what the block gives, or a dash when it gives nothing
    # (the variant does not sample allocations, or does not say).
    def median_of(runs, &block)
      values = runs.filter_map(&block)
      values.empty? ? NO_VALUE : Summary.percentile(values, 0.5).round.to_s
    end

    def percent(ratio)
      format("%+.1f%%", (ratio - 1) * 100)
    end

    def unavailable
      lines = @result.unavailable.flat_map do |series, profilers|
        profilers.map { |profiler, reason| "- Ruby #{series}: #{profiler} not measured: #{reason}" }
      end
      lines.empty? ? "" : "## Not measured\n\n#{lines.join("\n")}\n\n"
    end

    def failures
      return "" if @result.failures.empty?

      # The same failure in several rounds is one line, with its count.
      counts = @result.failures.map { |failure| failure_summary(failure) }.tally
      lines = counts.map { |summary, count| "- #{count} x #{summary}" }
      "## Runs that failed (left out of the tables)\n\n#{lines.join("\n")}\n"
    end

    def failure_summary(failure)
      lines = failure.lines
      bug = lines.find { |line| line.include?("[BUG]") }&.strip&.delete_prefix("#{Child::ROOT}/")
      frame = lines.lazy.filter_map { |line| line[SONDE_FRAME[0]] || line[SONDE_FRAME[1], 1] }.first
      summary = [lines.first.strip.delete_suffix(":"), bug, frame && "in #{frame}"].compact.join("; ")
      RUN_SPECIFIC.reduce(summary) { |text, pattern| text.gsub(pattern, "") }
    end
  end
end
