# frozen_string_literal: true

require_relative "child"

module SondeBench
  # What the side-by-side benchmarks share (idle_cost.rb,
  # thread_start_cost.rb): each runs one child per (Ruby, profiler) in
  # shuffled interleaved rounds and prints medians, naming the commit
  # measured and the peers that could not run.
  module SideBySide
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
