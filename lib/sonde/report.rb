# frozen_string_literal: true

require "sonde/errors"
require "sonde/pprof"

module Sonde
  # The text report of `sonde report`: the functions that took the most CPU
  # or wall time, for the whole profile or thread by thread.
  #
  #   Sonde::Report.new(Sonde::Pprof.read("app.pprof"), by: :thread, top: 10).render($stdout)
  #
  # Self time is charged to the leaf frame of each sample; total (inclusive)
  # time to every distinct function on its stack, once per sample even when
  # the function recurses. Functions are grouped by name and file.
  class Report
    # One kind of table: which sample type holds its value, and which one (if
    # any) counts its samples.
    Kind = Struct.new(:title, :type, :count_type)
    KINDS = {
      cpu: Kind.new("CPU time", "cpu-time", "cpu-samples"),
      wall: Kind.new("Wall time", "wall-time", nil)
    }.freeze
    BY_VALUES = [nil, :thread].freeze
    SAMPLE_VALUES = [nil, :cpu, :wall].freeze
    DEFAULT_TOP = 20
    THREAD_ID = "thread id"
    THREAD_NAME = "thread name"

    def initialize(profile, by: nil, sample: nil, top: DEFAULT_TOP)
      check_option(:by, by, BY_VALUES)
      check_option(:sample, sample, SAMPLE_VALUES)
      unless top.is_a?(Integer) && top.positive?
        raise Sonde::ArgumentError, "top: #{top.inspect} is not accepted (expected a positive Integer)"
      end

      @profile = profile
      @by = by
      @kinds = sample ? [KINDS.fetch(sample)] : KINDS.values
      @top = top
      @frames = FrameIndex.new(profile)
    end

    def render(io)
      if @by == :thread
        render_threads(io)
      else
        render_tables(io, @profile.samples)
      end
      io
    end

    private

    def check_option(name, value, accepted)
      return if accepted.include?(value)

      raise Sonde::ArgumentError,
            "#{name}: #{value.inspect} is not accepted (expected one of #{accepted.map(&:inspect).join(", ")})"
    end

    def render_tables(io, samples)
      @kinds.each_with_index do |kind, i|
        io.puts if i.positive?
        render_table(io, kind, samples)
      end
    end

    # Threads with the most of the first kind's value come first; the second
    # kind breaks ties.
    def render_threads(io)
      threads = ThreadSplit.new(@profile.samples).threads
      indexes = @kinds.map { |kind| @profile.value_index(kind.type) }
      threads = threads.sort_by do |thread|
        [*indexes.map { |index| index ? -thread.sum(index) : 0 }, thread.id.to_s]
      end
      threads.each_with_index do |thread, i|
        io.puts if i.positive?
        io.puts thread.heading
        render_tables(io, thread.samples)
      end
      io.puts "No samples." if threads.empty?
    end

    def render_table(io, kind, samples)
      value_index = @profile.value_index(kind.type)
      unless value_index
        io.puts "#{kind.title}: not recorded in this profile (it has no #{kind.type} samples)"
        return
      end

      tally = Tally.new(@frames, samples, value_index, kind.count_type && @profile.value_index(kind.count_type))
      if tally.total.zero?
        io.puts "#{kind.title}: none recorded"
        return
      end

      io.puts title(kind, tally)
      io.puts Table.new(rows(tally)).lines
    end

    def title(kind, tally)
      text = "#{kind.title}: #{Report.human_duration(tally.total)}"
      return text unless kind.count_type

      "#{text} in #{tally.count} #{tally.count == 1 ? "sample" : "samples"}"
    end

    def rows(tally)
      groups = @frames.groups
      top = tally.seen_groups.sort_by do |group|
        [-tally.self_values[group], -tally.total_values[group], groups[group].name]
      end
      top.first(@top).map do |group|
        function = groups[group]
        self_value = tally.self_values[group]
        total_value = tally.total_values[group]
        [Report.human_duration(self_value), percent(self_value, tally.total),
         Report.human_duration(total_value), percent(total_value, tally.total),
         function.name, function.location]
      end
    end

    def percent(value, total)
      format("%.1f%%", 100.0 * value / total)
    end

    # Units for nanosecond values, largest last.
    DURATION_UNITS = [["ns", 1], ["µs", 1_000], ["ms", 1_000_000], ["s", 1_000_000_000]].freeze
    UNIT_STEP = 1000

    # "153 µs", "15.2 ms", "2.03 s": two or three significant digits.
    def self.human_duration(nanoseconds)
      return "#{nanoseconds} ns" if nanoseconds.abs < UNIT_STEP

      DURATION_UNITS.each_with_index do |(unit, factor), i|
        text = significant(nanoseconds.to_f / factor)
        last = i == DURATION_UNITS.size - 1
        return "#{text} #{unit}" if last || text.to_f.abs < UNIT_STEP
      end
    end

    def self.significant(value)
      return format("%.2f", value) if value.abs.round(2) < 10
      return format("%.1f", value) if value.abs.round(1) < 100

      format("%.0f", value)
    end

    # Maps each location to a function group (name, filename) and remembers,
    # per stack, its leaf group and its distinct groups.
    class FrameIndex
      Group = Struct.new(:name, :filename, :start_line) do
        def location
          return filename if start_line.zero? || filename.empty?

          "#{filename}:#{start_line}"
        end
      end

      attr_reader :groups

      def initialize(profile)
        @groups = []
        group_ids = {}
        @location_groups = {}
        profile.locations.each_value do |location|
          function = profile.functions.fetch(location.function_id, Pprof::UNKNOWN_FUNCTION)
          key = [function.name, function.filename]
          group_ids[key] ||= @groups.push(Group.new(function.name, function.filename, function.start_line)).size - 1
          @location_groups[location.id] = group_ids[key]
        end
        # By the identity of each sample's location_ids array: every table
        # walks the same samples, and hashing a deep stack by content would
        # cost as much as resolving it again.
        @stacks = {}.compare_by_identity
      end

      # [leaf group or nil, distinct groups] of a stack of location ids.
      def stack(location_ids)
        @stacks[location_ids] ||= begin
          groups = location_ids.map { |id| @location_groups.fetch(id) }
          [groups.first, groups.uniq].freeze
        end
      end
    end

    # Self and total values per function group over a set of samples.
    class Tally
      attr_reader :total, :count, :self_values, :total_values

      # Arrays indexed by group: cheaper than hashes in the per-frame loop.
      def initialize(frames, samples, value_index, count_index)
        @total = 0
        @count = 0
        @self_values = Array.new(frames.groups.size, 0)
        @total_values = Array.new(frames.groups.size, 0)
        samples.each { |sample| add(frames, sample, value_index, count_index) }
      end

      # Indexes of the groups that appear in any counted sample.
      def seen_groups
        @total_values.each_index.reject { |group| @total_values[group].zero? }
      end

      private

      def add(frames, sample, value_index, count_index)
        value = sample.values[value_index]
        return if value.zero?

        @total += value
        @count += count_index ? sample.values[count_index] : 1
        leaf, groups = frames.stack(sample.location_ids)
        @self_values[leaf] += value if leaf
        total_values = @total_values
        groups.each { |group| total_values[group] += value }
      end
    end

    # The samples of each thread, by the "thread id" label.
    class ThreadSplit
      ThreadSamples = Struct.new(:id, :name, :samples) do
        def heading
          "Thread #{name || "(unnamed)"} (id #{id.nil? ? "unknown" : id})"
        end

        def sum(value_index)
          samples.sum { |sample| sample.values[value_index] }
        end
      end

      attr_reader :threads

      # A thread renamed while profiled (Thread.current.name = "x" right
      # after it started) has samples under each name; its heading takes
      # the name it had for most of its samples.
      def initialize(samples)
        by_id = {}
        names = Hash.new { |hash, id| hash[id] = Hash.new(0) }
        samples.each do |sample|
          id = sample.labels[THREAD_ID]
          (by_id[id] ||= ThreadSamples.new(id, nil, [])).samples << sample
          name = sample.labels[THREAD_NAME]
          names[id][name] += 1 if name
        end
        by_id.each { |id, thread| thread.name = names[id].max_by { |_name, count| count }&.first }
        @threads = by_id.values
      end
    end

    # Columns of numbers right-aligned, then the function name and location
    # left-aligned.
    class Table
      HEADER = ["self", "self%", "total", "total%", "function", "location"].freeze
      NUMERIC_COLUMNS = 4
      GAP = "  "

      def initialize(rows)
        @rows = [HEADER, *rows]
        @widths = HEADER.each_index.map { |i| @rows.map { |row| row[i].length }.max }
      end

      def lines
        @rows.map { |row| line(row) }
      end

      private

      def line(row)
        cells = row.each_with_index.map do |cell, i|
          next cell if i == row.size - 1

          i < NUMERIC_COLUMNS ? cell.rjust(@widths[i]) : cell.ljust(@widths[i])
        end
        cells.join(GAP).rstrip
      end
    end
  end
end
