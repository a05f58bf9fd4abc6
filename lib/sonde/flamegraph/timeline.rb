# frozen_string_literal: true

require "sonde/pprof"
require "sonde/profile_names"

module Sonde
  module Flamegraph
    # The timeline part of the page's data: each timed sample (a CPU or wall
    # sample with its end_timestamp_ns label, docs/timeline.md) with its
    # moment, one lane per thread. A moment does not repeat its stack,
    # thread, state or labels: it points at the page's sample (Data's
    # "samples" entry) it was summed into, which holds them.
    #
    #   originNs: the epoch nanosecond that time 0 stands for, as a String
    #             (JavaScript numbers cannot hold it exactly)
    #   endUs:    where the time axis ends, in microseconds from origin
    #   lanes:    [[thread index, [sample, end, value per type, ...]], ...]
    #             in the page's thread order (a Sonde profile's: the order
    #             its threads were met); in each, its moments by end
    #             (microseconds from origin); a wall sample covers the
    #             wall-time before its end
    #   names:    each lane's name: its thread's, with the thread id
    #             after it when another lane has the same name (the
    #             workers of a merged fleet each have a "main")
    #
    # nil when no sample has a moment: recorded with --no-timeline,
    # timeline: false, or in continuous mode.
    #
    # Which page sample a pprof sample was folded into is found by the key
    # Converters::Stacks folds by (thread, state, functions, labels but
    # Sonde's own), from what Stacks shows: functions by name and file,
    # threads by id. A sample whose page sample is not found is left out.
    class Timeline
      NS_PER_US = 1000

      # sample_of_row: for each of stacks' rows, its index in the page's
      # samples (nil for a row the page leaves out).
      def initialize(profile, stacks, sample_of_row)
        @profile = profile
        @stacks = stacks
        @sample_of_row = sample_of_row
        @labels = ProfileNames.all.fetch(:labels)
        @own_labels = @labels.values
        @timestamp = @labels.fetch(:end_timestamp_ns)
        @wall = profile.value_index(ProfileNames.sample_type(:wall_time))
      end

      def to_h
        timed = @profile.samples.select { |sample| sample.labels[@timestamp].is_a?(Integer) }
        return nil if timed.empty?

        origin = origin_ns(timed)
        lanes = lanes(timed, origin)
        return nil if lanes.empty?

        { "originNs" => origin.to_s, "endUs" => axis_end_us(lanes, origin), "lanes" => lanes,
          "names" => lane_names(lanes) }
      end

      private

      # The profile's start, unless a moment is earlier (merged files).
      def origin_ns(timed)
        first = timed.map { |sample| sample.labels[@timestamp] - wall_ns(sample.values) }.min
        start = @profile.time_nanos.to_i
        start.positive? && start <= first ? start : first
      end

      # The latest moment, or the profile's end if later (merged files:
      # the latest of theirs, not the sum of their durations).
      def axis_end_us(lanes, origin)
        last = lanes.map { |_thread, moments| moments[1 - width] }.max
        [last, ((@profile.end_nanos - origin) / NS_PER_US)].max
      end

      def lane_names(lanes)
        threads = lanes.map { |thread, _moments| @stacks.threads[thread] }
        repeated = threads.map(&:label).tally.select { |_label, count| count > 1 }
        threads.map { |thread| repeated.key?(thread.label) && thread.id ? "#{thread.label} (#{thread.id})" : thread.label }
      end

      def width
        @width ||= 2 + @stacks.sample_types.size
      end

      # The wall time a sample covers before its moment.
      def wall_ns(values)
        @wall ? [values[@wall].to_i, 0].max : 0
      end

      # [[thread, moments]], threads in the page's order, moments by end.
      def lanes(timed, origin)
        by_thread = Hash.new { |hash, thread| hash[thread] = [] }
        timed.each do |sample|
          page_sample = page_sample_of(sample)
          next unless page_sample

          end_us = (sample.labels[@timestamp] - origin) / NS_PER_US
          by_thread[@stacks.rows[page_sample[1]].thread] << [end_us, page_sample[0], sample.values]
        end
        by_thread.sort_by(&:first).map do |thread, moments|
          in_order = moments.sort_by.with_index { |(end_us, _, _), i| [end_us, i] }
          [thread, in_order.flat_map { |end_us, page_sample, values| [page_sample, end_us, *values] }]
        end
      end

      # [page sample index, row index], or nil when the page left its row out.
      def page_sample_of(sample)
        row = rows_by_key[key(sample)]
        page_sample = row && @sample_of_row[row]
        page_sample && [page_sample, row]
      end

      def rows_by_key
        @rows_by_key ||= @stacks.rows.each_with_index.to_h do |row, i|
          [[row.thread, row.state, row.frames, row.labels], i]
        end
      end

      def key(sample)
        labels = sample.labels
        [thread_indexes[labels[@labels.fetch(:thread_id)]], state_indexes[labels[@labels.fetch(:state)]],
         sample.location_ids.reverse.map { |id| function_of_location(id) }, folded_labels(labels)]
      end

      def thread_indexes
        @thread_indexes ||= @stacks.threads.each_with_index.to_h { |thread, i| [thread.id, i] }
      end

      def state_indexes
        @state_indexes ||= @stacks.states.each_with_index.to_h
      end

      def function_of_location(id)
        @function_of_location ||= {}
        @function_of_location[id] ||= begin
          location = @profile.locations.fetch(id)
          function = @profile.functions.fetch(location.function_id, Pprof::UNKNOWN_FUNCTION)
          function_indexes[[function.name, function.filename]]
        end
      end

      def function_indexes
        @function_indexes ||= @stacks.functions.each_with_index.to_h { |function, i| [[function.name, function.filename], i] }
      end

      # The labels a row is folded by (labels: :all): all but Sonde's own.
      def folded_labels(labels)
        labels.reject { |name, _value| @own_labels.include?(name) }.to_h { |name, value| [name, value.to_s] }
      end
    end
  end
end
