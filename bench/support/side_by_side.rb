# frozen_string_literal: true

require_relative "child"

module SondeBench
  # What the side-by-side benchmarks share (idle_cost.rb,
  # thread_start_cost.rb, cpu_cost_perf.rb): each runs one child per
  # (Ruby, profiler, ...) in shuffled interleaved rounds and prints
  # medians, naming the commit measured and the peers that could not run.
  module SideBySide
    # Runs each case ([ruby, ..., column]) once a round, in a shuffled
    # order (the same seed every run), for `rounds` rounds, and appends what
    # the block returns to results[[ruby.series, ...the rest of the case]].
    # With `missing` ({series => {column => reason}}), a case whose child
    # fails is left out of the later rounds and its reason noted there;
    # without, the failure ends the run.
    def interleave(cases, rounds:, results:, word: "round", missing: nil)
      random = Random.new(1)
      rounds.times do |round|
        cases.shuffle(random: random).each do |ruby, *rest|
          next if missing&.dig(ruby.series, rest.last)

          results[[ruby.series, *rest]] << yield(ruby, *rest)
        rescue Child::Failure => e
          raise unless missing

          missing[ruby.series][rest.last] = "failed in #{word} #{round + 1}: #{e.message.lines.first.strip}"
        end
        $stderr.print "\r#{word} #{round + 1}/#{rounds}"
      end
      $stderr.puts
    end

    # The lines under a Ruby's table naming the columns it lacks and why.
    def missing_notes(reasons, verb)
      return [] if reasons.empty?

      ["", *reasons.map { |column, reason| "- #{column}: #{verb}: #{reason}" }]
    end

    # { column => why it cannot run on ruby } for the columns whose
    # profiler (columns: { column => profiler hook name }) cannot.
    def missing_columns(ruby, lib, columns)
      columns.filter_map do |column, profiler|
        reason = ruby.unavailable_reason(profiler, lib)
        [column, reason] if reason
      end.to_h
    end

    def median(values)
      sorted = values.sort
      middle = sorted.size / 2
      sorted.size.odd? ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0
    end

    # Read as the children's copy of lib/ is taken: the tree may move on
    # during the run.
    def commit
      out = `git -C #{Child::ROOT} rev-parse --short HEAD 2>/dev/null`.strip
      return "unknown (no git here)" if out.empty?

      modified = `git -C #{Child::ROOT} status --porcelain ext lib 2>/dev/null`.empty? ? "" : " (ext/ or lib/ modified)"
      "#{out}#{modified}"
    rescue SystemCallError
      "unknown (no git here)"
    end

    def load_average = File.read("/proc/loadavg").split.first(3).join(" ")
  end
end
