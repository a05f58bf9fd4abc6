# frozen_string_literal: true

require "sonde/errors"
require "sonde/pprof"
require "sonde/profile_names"
require "sonde/converters/stacks"

module Sonde
  # The text report of `sonde report`: the functions that took the most CPU
  # or wall time, for the whole profile, thread by thread or state by state;
  # or the callers and callees of one function.
  #
  #   Sonde::Report.new(Sonde::Pprof.read("app.pprof"), by: :thread, top: 10).render($stdout)
  #   Sonde::Report.new(profile, focus: /Parser/, ignore: /gems/, lines: true).render($stdout)
  #   Sonde::Report.new(profile, function: "JSON.parse").render($stdout)
  #
  # Self time is charged to the leaf frame of each sample; total (inclusive)
  # time to every distinct function on its stack, once per sample even when
  # the function recurses. Functions are grouped by name and file (with
  # lines: true, by name, file and line).
  class Report
    # One kind of table: which sample type holds its value, and which one (if
    # any) counts its samples.
    Kind = Struct.new(:title, :type, :count_type)
    BY_VALUES = [nil, :thread, :state].freeze
    # by: "label:NAME" splits by the value of the string label NAME
    # (Sonde.with_labels, Sonde::Middleware's "endpoint").
    BY_LABEL = /\Alabel:(.+)\z/.freeze
    SAMPLE_VALUES = [nil, :cpu, :wall].freeze
    DEFAULT_TOP = 20

    # cpu: and wall:, with the sample-type names of Sonde's profiles.
    def self.kinds
      {
        cpu: Kind.new("CPU time", ProfileNames.sample_type(:cpu_time), ProfileNames.sample_type(:cpu_samples)),
        wall: Kind.new("Wall time", ProfileNames.sample_type(:wall_time), nil)
      }
    end

    def initialize(profile, by: nil, sample: nil, top: DEFAULT_TOP, focus: nil, ignore: nil, lines: false,
                   function: nil)
      check_option(:by, by, BY_VALUES) unless by.is_a?(String) && BY_LABEL.match?(by)
      check_option(:sample, sample, SAMPLE_VALUES)
      check_option(:lines, lines, [true, false])
      unless top.is_a?(Integer) && top.positive?
        raise Sonde::ArgumentError, "top: #{top.inspect} is not accepted (expected a positive Integer)"
      end
      check_regexp(:focus, focus)
      check_regexp(:ignore, ignore)
      unless function.nil? || (function.is_a?(String) && !function.empty?)
        raise Sonde::ArgumentError, "function: #{function.inspect} is not accepted (expected a function name)"
      end

      @profile = profile
      @by = by
      @kinds = sample ? [Report.kinds.fetch(sample)] : Report.kinds.values
      @top = top
      @frames = FrameIndex.new(profile, lines: lines)
      @samples = SampleFilter.new(@frames, focus: focus, ignore: ignore).select(profile.samples)
      @function = function && @frames.find_function(function)
    end

    def render(io)
      if @function
        FunctionView.new(@profile, @frames, @function, @kinds).render(io, @samples)
      elsif @by == :thread
        render_threads(io)
      elsif @by == :state
        render_states(io)
      elsif @by.is_a?(String)
        render_split(io, LabelSplit.new(@samples, @by[BY_LABEL, 1]).parts)
      else
        render_tables(io, @samples)
      end
      io
    end

    private

    def check_option(name, value, accepted)
      return if accepted.include?(value)

      label = name == :by ? ", or \"label:NAME\"" : ""
      raise Sonde::ArgumentError,
            "#{name}: #{value.inspect} is not accepted (expected one of #{accepted.map(&:inspect).join(", ")}#{label})"
    end

    def check_regexp(name, value)
      return if value.nil? || value.is_a?(Regexp)

      raise Sonde::ArgumentError, "#{name}: #{value.inspect} is not accepted (expected a Regexp or nil)"
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
      render_split(io, ThreadSplit.new(@samples).threads)
    end

    # States with the most time first, as threads.
    def render_states(io)
      render_split(io, StateSplit.new(@samples).states)
    end

    def render_split(io, parts)
      indexes = @kinds.map { |kind| @profile.value_index(kind.type) }
      parts = parts.sort_by do |part|
        [*indexes.map { |index| index ? -part.sum(index) : 0 }, part.id.to_s]
      end
      parts.each_with_index do |part, i|
        io.puts if i.positive?
        io.puts part.heading
        render_tables(io, part.samples)
      end
      io.puts "No samples." if parts.empty?
    end

    # The index of kind's sample type in profile, or nil after saying on io
    # that the profile does not record it.
    def self.recorded_index(io, profile, kind)
      index = profile.value_index(kind.type)
      io.puts "#{kind.title}: not recorded in this profile (it has no #{kind.type} samples)" unless index
      index
    end

    def render_table(io, kind, samples)
      value_index = Report.recorded_index(io, @profile, kind)
      return unless value_index

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
      Report.percent(value, total)
    end

    def self.percent(value, total)
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

    # Maps each location to a function group (name, filename; with lines:
    # true, also the line) and remembers, per stack, its leaf group and its
    # distinct groups.
    class FrameIndex
      # name, filename, start_line and #location, as the converters' functions.
      Group = Converters::Stacks::Function

      attr_reader :groups

      def initialize(profile, lines: false)
        @groups = []
        group_ids = {}
        @location_groups = {}
        profile.locations.each_value do |location|
          function = profile.functions.fetch(location.function_id, Pprof::UNKNOWN_FUNCTION)
          line = lines ? location.line : function.start_line
          key = lines ? [function.name, function.filename, line] : [function.name, function.filename]
          group_ids[key] ||= @groups.push(Group.new(function.name, function.filename, line)).size - 1
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

      # The groups of a stack, leaf first, repeats kept.
      def path(location_ids)
        location_ids.map { |id| @location_groups.fetch(id) }
      end

      # The indexes of the groups of the function called name: an exact
      # name, else the one function whose name contains it. Raises
      # Sonde::ArgumentError naming the candidates otherwise.
      def find_function(name)
        exact = @groups.each_index.select { |i| @groups[i].name == name }
        return exact unless exact.empty?

        names = @groups.map(&:name).uniq.select { |candidate| candidate.include?(name) }
        return @groups.each_index.select { |i| @groups[i].name == names.first } if names.size == 1

        raise Sonde::ArgumentError, "function: no function named #{name.inspect} in this profile" if names.empty?

        shown = names.sort.first(FUNCTION_CANDIDATES)
        more = names.size > shown.size ? ", ..." : ""
        raise Sonde::ArgumentError,
              "function: #{name.inspect} matches #{names.size} functions (#{shown.join(", ")}#{more}); give the full name"
      end

      FUNCTION_CANDIDATES = 5
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

    # A part of the samples (a thread's, a state's): its total of one value.
    module SampleSum
      def sum(value_index)
        samples.sum { |sample| sample.values[value_index] }
      end
    end

    # The samples of each value of one string label (label:NAME); samples
    # without it come under "(none)".
    class LabelSplit
      LabelSamples = Struct.new(:name, :id, :samples) do
        include SampleSum

        def heading
          id ? "Label #{name}=#{id}" : "Label #{name} (none)"
        end
      end

      attr_reader :parts

      def initialize(samples, name)
        by_value = {}
        samples.each do |sample|
          value = sample.labels[name]
          (by_value[value] ||= LabelSamples.new(name, value, [])).samples << sample
        end
        @parts = by_value.values
      end
    end

    # The samples of each state, by the "state" label.
    class StateSplit
      StateSamples = Struct.new(:id, :samples) do
        include SampleSum

        def heading
          "State #{id || "(none)"}"
        end
      end

      attr_reader :states

      def initialize(samples)
        by_state = {}
        samples.each do |sample|
          state = sample.labels[ProfileNames.label(:state)]
          (by_state[state] ||= StateSamples.new(state, [])).samples << sample
        end
        @states = by_state.values
      end
    end

    # The samples of each thread, by the "thread id" label.
    class ThreadSplit
      ThreadSamples = Struct.new(:id, :name, :samples) do
        include SampleSum

        def heading
          "Thread #{name || "(unnamed)"} (id #{id.nil? ? "unknown" : id})"
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
          id = sample.labels[ProfileNames.label(:thread_id)]
          (by_id[id] ||= ThreadSamples.new(id, nil, [])).samples << sample
          name = sample.labels[ProfileNames.label(:thread_name)]
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

      def initialize(rows, header: HEADER, numeric_columns: NUMERIC_COLUMNS)
        @rows = [header, *rows]
        @numeric_columns = numeric_columns
        @widths = header.each_index.map { |i| @rows.map { |row| row[i].length }.max }
      end

      def lines
        @rows.map { |row| line(row) }
      end

      private

      def line(row)
        cells = row.each_with_index.map do |cell, i|
          next cell if i == row.size - 1

          i < @numeric_columns ? cell.rjust(@widths[i]) : cell.ljust(@widths[i])
        end
        cells.join(GAP).rstrip
      end
    end
  end
end

require "sonde/report/sample_filter"
require "sonde/report/function_view"
