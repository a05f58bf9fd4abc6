# frozen_string_literal: true

require "sonde/errors"
require "sonde/pprof"
require "sonde/profile_names"
require "sonde/quantities"
require "sonde/views"
require "sonde/converters/stacks"

module Sonde
  # The text report of `sonde report`: the functions that took the most CPU
  # or wall time, or allocated the most objects, or hold the most live heap,
  # for the whole profile, thread by thread, state by state or class by
  # class; or the callers and callees of one function.
  #
  #   Sonde::Report.new(Sonde::Pprof.read("app.pprof"), by: :thread, top: 10).render($stdout)
  #   Sonde::Report.new(profile, sample: :alloc, by: :class).render($stdout)
  #   Sonde::Report.new(profile, focus: /Parser/, ignore: /gems/, lines: true).render($stdout)
  #   Sonde::Report.new(profile, function: "JSON.parse").render($stdout)
  #
  # Self values are charged to the leaf frame of each sample; total
  # (inclusive) values to every distinct function on its stack, once per
  # sample even when the function recurses. Functions are grouped by name
  # and file (with lines: true, by name, file and line). Values read in
  # their sample type's unit: times, object counts, bytes.
  class Report
    # by: :class splits by the class of the allocated objects (allocation
    # and heap samples carry it; CPU and wall samples come under "(none)").
    BY_VALUES = [nil, :thread, :state, :class].freeze
    # by: "label:NAME" splits by the value of the string label NAME
    # (Sonde.with_labels, Sonde::Middleware's "endpoint").
    BY_LABEL = /\Alabel:(.+)\z/.freeze
    DEFAULT_TOP = 20

    # Where a table's values are (index: in each sample's values) and how
    # they read (unit: their sample type's, "nanoseconds", "bytes"...).
    Recorded = Struct.new(:index, :unit) do
      def show(value)
        Quantities.format(value, unit)
      end

      def count?
        Quantities.kind(unit) == :count
      end
    end

    def initialize(profile, by: nil, sample: nil, top: DEFAULT_TOP, focus: nil, ignore: nil, lines: false,
                   function: nil)
      check_option(:by, by, BY_VALUES) unless by.is_a?(String) && BY_LABEL.match?(by)
      check_option(:sample, sample, [nil, *Views.all.keys])
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
      @kinds = sample ? [Views.all.fetch(sample)] : Report.default_kinds(profile)
      @top = top
      @frames = FrameIndex.new(profile, lines: lines)
      @samples = SampleFilter.new(@frames, focus: focus, ignore: ignore).select(profile.samples)
      @function = function && @frames.find_function(function)
    end

    # Without sample:, CPU and wall time always (a profile without them
    # says so), allocations and live heap when the profile recorded them.
    def self.default_kinds(profile)
      present = Views.present(profile)
      Views.all.values.select { |view| view.always_recorded? || present.include?(view) }
    end

    # The tables this report was asked for (or shows by default).
    attr_reader :kinds

    # False when the profile has none of the sample types of those tables:
    # every table would only say it is not recorded.
    def shows_anything?
      @kinds.any? { |kind| @profile.value_index(kind.type) }
    end

    def render(io)
      if @function
        FunctionView.new(@profile, @frames, @function, @kinds).render(io, @samples)
      elsif @by == :thread
        render_threads(io)
      elsif @by == :state
        render_states(io)
      elsif @by == :class
        render_split(io, LabelSplit.new(@samples, ProfileNames.label(:allocation_class), title: "Class").parts)
      elsif @by.is_a?(String)
        render_split(io, LabelSplit.new(@samples, @by[BY_LABEL, 1]).parts)
      else
        render_tables(io, @samples)
      end
      render_notes(io)
      io
    end

    # What Sonde wrote into the profile about what it leaves out (threads of
    # other Ractors, ext/sonde/ractor_accounting.c): comments it starts so.
    NOTE_PREFIX = "sonde: "

    def self.notes(profile)
      profile.comments.select { |comment| comment.start_with?(NOTE_PREFIX) }
                      .map { |comment| comment.delete_prefix(NOTE_PREFIX) }
    end

    private

    # Merged profiles bring one note each that differs only in its figures
    # (a day's periods, each "no tick of this profile was listened to
    # (... this profile spans 7 ticks)"): the first of each such kind is
    # printed, with how many more there are.
    def render_notes(io)
      Report.notes(@profile).group_by { |note| note.gsub(/\d+(\.\d+)?/, "#") }.each_value do |alike|
        more = alike.size - 1
        io.puts "Note: #{alike.first}#{" (and #{more} more like it, from the other profiles merged here)" if more.positive?}"
      end
    end

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

    def render_tables(io, samples, kinds = @kinds)
      kinds.each_with_index do |kind, i|
        io.puts if i.positive?
        render_table(io, kind, samples)
      end
    end

    # Threads with the most of the first kind's value come first; the second
    # kind breaks ties.
    def render_threads(io)
      render_split(io, ThreadSplit.new(@samples).threads)
    end

    # States with the most of the first kind's value first, as threads.
    def render_states(io)
      render_split(io, StateSplit.new(@samples).states)
    end

    # Each part shows the tables it has values for, and a part with none is
    # left out: CPU samples carry no allocation class, allocation samples no
    # CPU time, and a profile with both would otherwise fill a split with
    # "none recorded". A sample type the profile lacks is said once, first.
    def render_split(io, parts)
      recorded = @kinds.select { |kind| @profile.value_index(kind.type) }
      (@kinds - recorded).each { |kind| Report.recorded(io, @profile, kind) }
      return if recorded.empty?

      io.puts if recorded.size < @kinds.size
      indexes = recorded.map { |kind| @profile.value_index(kind.type) }
      shown = parts.filter_map do |part|
        sums = indexes.map { |index| part.sum(index) }
        [part, sums] unless sums.all?(&:zero?)
      end
      if parts.empty?
        io.puts "No samples."
      elsif shown.empty?
        render_tables(io, @samples, recorded) # each says "none recorded"
      else
        render_parts(io, shown, recorded)
      end
    end

    # shown: [part, its sum of each recorded kind] pairs; busiest first.
    def render_parts(io, shown, recorded)
      shown.sort_by { |part, sums| [*sums.map(&:-@), part.id.to_s] }.each_with_index do |(part, sums), i|
        io.puts if i.positive?
        io.puts part.heading
        render_tables(io, part.samples, recorded.reject.with_index { |_kind, k| sums[k].zero? })
      end
    end

    # Where kind's value is in profile's samples and its unit, or nil after
    # saying on io that the profile does not record it (and, for what is
    # recorded only when asked, how to record it).
    def self.recorded(io, profile, kind)
      index = profile.value_index(kind.type)
      return Recorded.new(index, profile.sample_types[index][1]) if index

      io.puts "#{kind.title}: not recorded in this profile (it has no #{kind.type} samples#{how_to_record(kind)})"
      nil
    end

    # The page on recording allocations and the live heap.
    RECORDING_PAGE = "docs/memory.md"

    def self.how_to_record(kind)
      return "" if kind.always_recorded?

      "; record them with `sonde record #{kind.record_option}`, see #{RECORDING_PAGE}"
    end

    def render_table(io, kind, samples)
      values = Report.recorded(io, @profile, kind)
      return unless values

      # An estimated table (allocations) counts the samples its estimate rests on.
      count_type = kind.count_type || kind.estimated_from
      count_index = count_type && @profile.value_index(count_type)
      tally = Tally.new(@frames, samples, values.index, count_index)
      if tally.total.zero?
        io.puts "#{kind.title}: none recorded"
        return
      end

      # Without its count type, a table counts the samples that have a value.
      io.puts title(kind, values, tally, count_noun: count_index ? kind.counted : "sample")
      io.puts estimate_basis(tally.count) if kind.estimated_from && count_index
      io.puts Table.new(rows(tally, values)).lines
    end

    # "CPU time: 100 ms in 10 samples", "Allocations: 2,000,000 objects",
    # "Live heap: 64.0 MB in 300,000 objects".
    def title(kind, values, tally, count_noun:)
      total = values.show(tally.total)
      total = "#{total} #{Report.noun(kind.counted, tally.total)}" if values.count? && kind.counted
      text = "#{kind.title}: #{total}"
      return text unless kind.count_type
      # "31.3 ms in 0 samples" reads as a contradiction: say what it is.
      return "#{text} in no #{count_noun} (#{kind.uncounted})" if tally.count.zero? && kind.uncounted

      "#{text} in #{Quantities.count(tally.count)} #{Report.noun(count_noun, tally.count)}"
    end

    # Under this many samples an estimated table is flagged: at 100, a
    # function with half the total is read within 5 points (one standard
    # error, sqrt(0.5 * 0.5 / 100)); at 3, within 29.
    FEW_SAMPLES = 100

    # The line on how many samples an estimated table's values rest on (a
    # profile without that count, of an older Sonde or another producer,
    # gets none), with a warning when they are few. None: its listening
    # windows heard too little, and an earlier profile's samples lent it
    # their mix (docs/memory.md, "Listening windows").
    def estimate_basis(count)
      return "  estimated from #{Quantities.count(count)} samples" if count >= FEW_SAMPLES

      basis = if count.zero?
                "estimated from no sample of its own: an earlier profile's samples lent it their mix"
              else
                "estimated from #{Quantities.count(count)} #{Report.noun("sample", count)}: too few for the " \
                  "shares below to be more than a hint"
              end
      "  #{basis} (more samples: a smaller alloc_interval, a larger alloc_duty, a longer profile; #{RECORDING_PAGE})"
    end

    def self.noun(singular, number)
      number == 1 ? singular : "#{singular}s"
    end

    def rows(tally, values)
      groups = @frames.groups
      top = tally.seen_groups.sort_by do |group|
        [-tally.self_values[group], -tally.total_values[group], groups[group].name]
      end
      top.first(@top).map do |group|
        function = groups[group]
        self_value = tally.self_values[group]
        total_value = tally.total_values[group]
        [values.show(self_value), percent(self_value, tally.total),
         values.show(total_value), percent(total_value, tally.total),
         function.name, function.location]
      end
    end

    def percent(value, total)
      Report.percent(value, total)
    end

    def self.percent(value, total)
      format("%.1f%%", 100.0 * value / total)
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
    # without it come under "(none)". With a title, the headings use it
    # instead of the label's name ("Class Foo").
    class LabelSplit
      LabelSamples = Struct.new(:name, :title, :id, :samples) do
        include SampleSum

        def heading
          return "#{title} #{id || "(none)"}" if title

          id ? "Label #{name}=#{id}" : "Label #{name} (none)"
        end
      end

      attr_reader :parts

      def initialize(samples, name, title: nil)
        by_value = {}
        samples.each do |sample|
          value = sample.labels[name]
          (by_value[value] ||= LabelSamples.new(name, title, value, [])).samples << sample
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
    # left-aligned. A name or location longer than MAX_TEXT_WIDTH is cut
    # there, ending in ELLIPSIS: one generated 1 MB method name would
    # otherwise pad every line of the table to its width.
    class Table
      HEADER = ["self", "self%", "total", "total%", "function", "location"].freeze
      NUMERIC_COLUMNS = 4
      GAP = "  "
      MAX_TEXT_WIDTH = 120
      ELLIPSIS = "..."

      def initialize(rows, header: HEADER, numeric_columns: NUMERIC_COLUMNS)
        @rows = [header, *rows].map { |row| row.each_with_index.map { |cell, i| i < numeric_columns ? cell : cut(cell) } }
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

      def cut(text)
        text.length > MAX_TEXT_WIDTH ? "#{text[0, MAX_TEXT_WIDTH - ELLIPSIS.length]}#{ELLIPSIS}" : text
      end
    end
  end
end

require "sonde/report/sample_filter"
require "sonde/report/function_view"
